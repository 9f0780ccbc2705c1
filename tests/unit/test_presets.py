"""Stack presets: the exact sysctls per reordering-recovery preset, and cc availability."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig.campaign import presets
from mprig.errors import UsageError


def test_nopr_switches_every_mechanism_off_but_sack() -> None:
    assert presets.recovery_sysctls("nopr") == {
        "net.ipv4.tcp_sack": "1",
        "net.ipv4.tcp_dsack": "0",
        "net.ipv4.tcp_frto": "0",
        "net.ipv4.tcp_timestamps": "0",
        "net.ipv4.tcp_recovery": "0",
        "net.ipv4.tcp_early_retrans": "0",
        "net.ipv4.tcp_reordering": "3",
        "net.ipv4.tcp_max_reordering": "3",
    }


def test_each_preset_adds_one_mechanism_to_nopr() -> None:
    nopr = presets.recovery_sysctls("nopr")
    added = {
        name: {k: v for k, v in presets.recovery_sysctls(name).items() if nopr[k] != v}
        for name in ("dsack", "frto", "eifel")
    }
    assert added == {
        "dsack": {
            "net.ipv4.tcp_dsack": "1",
            "net.ipv4.tcp_max_reordering": "300",
        },
        "frto": {"net.ipv4.tcp_frto": "2"},
        "eifel": {"net.ipv4.tcp_timestamps": "1"},
    }


def test_one_sack_setting_for_every_reordering_preset() -> None:
    """The recovery comparison must not partly measure SACK (issue 15: tcpdoor had it on
    while nopr and prr had it off)."""
    sack = {n: p.sysctls["net.ipv4.tcp_sack"] for n, p in presets.RECOVERY_PRESETS.items()}
    assert set(sack.values()) == {"1"}, sack


@pytest.mark.parametrize(
    ("cc", "coupling"),
    [
        ("reno", "uncoupled"),
        ("uncoupled", "uncoupled"),
        ("prr", "uncoupled"),
        ("tcpdoor", "uncoupled"),
        ("lia", "coupled"),
        ("olia", "coupled"),
        ("cwa", "coupled"),
        ("fully_coupled", "fully_coupled"),
        ("fccc", "fully_coupled"),
        ("tcpdoor_fccc", "fully_coupled"),
    ],
)
def test_coupling_of_each_cc(cc: str, coupling: str) -> None:
    assert presets.coupling(cc) == coupling


def test_linux_preset_is_the_kernel_default() -> None:
    assert presets.recovery_sysctls("linux") == {
        "net.ipv4.tcp_sack": "1",
        "net.ipv4.tcp_dsack": "1",
        "net.ipv4.tcp_frto": "2",
        "net.ipv4.tcp_timestamps": "1",
        "net.ipv4.tcp_recovery": "1",
        "net.ipv4.tcp_early_retrans": "3",
        "net.ipv4.tcp_reordering": "3",
        "net.ipv4.tcp_max_reordering": "300",
    }


def test_every_preset_sets_the_same_keys_and_they_exist_in_this_kernel() -> None:
    keys = {frozenset(p.sysctls) for p in presets.RECOVERY_PRESETS.values()}
    assert len(keys) == 1
    for key in next(iter(keys)):
        assert Path("/proc/sys", *key.split(".")).exists(), key


def test_every_preset_documents_its_difference_from_ns3() -> None:
    assert all(len(p.differs) > 40 for p in presets.RECOVERY_PRESETS.values())
    assert [p.paper_name for p in presets.RECOVERY_PRESETS.values()] == [
        "NoPR",
        "D-SACK",
        "F-RTO",
        "Eifel",
        "Linux default",
        "TCP-DOOR",
        "PR-R",
    ]


@pytest.mark.parametrize(("name", "algorithm"), [("tcpdoor", "door"), ("prr", "prr")])
def test_tcpdoor_and_prr_are_bpf_algorithms_on_the_nopr_base(name: str, algorithm: str) -> None:
    assert presets.recovery_sysctls(name) == presets.recovery_sysctls("nopr")
    assert presets.RECOVERY_PRESETS[name].cc == name
    assert presets.cc_algorithm(name) == algorithm
    presets.check_recovery_cc(name, name)  # the matching cc is accepted
    with pytest.raises(
        UsageError,
        match=rf"recovery '{name}' \(.+\) is the congestion control '{algorithm}': set "
        rf"`cc: {name}` in the variant \(it has cc: cubic\)",
    ):
        presets.check_recovery_cc(name, "cubic")


def test_other_recovery_presets_take_any_cc() -> None:
    for name in (None, "nopr", "dsack", "frto", "eifel", "linux"):
        presets.check_recovery_cc(name, "bbr")


def test_unknown_recovery_lists_the_presets() -> None:
    with pytest.raises(
        UsageError,
        match=r"recovery 'sack' is not a preset \(known: nopr, dsack, frto, eifel, linux, "
        r"tcpdoor, prr\)",
    ):
        presets.recovery_sysctls("sack")


MAINLINE = presets.parse_available_cc("reno bbr cubic\n")


def test_uncoupled_presets_run_on_mainline() -> None:
    assert MAINLINE == ("reno", "bbr", "cubic")
    assert presets.check_cc("uncoupled", MAINLINE) == presets.CCCheck("uncoupled", "reno", True, "")
    assert presets.check_cc("cubic", MAINLINE) == presets.CCCheck("cubic", "cubic", True, "")


def test_coupled_cc_is_unavailable_on_mainline_with_the_reason() -> None:
    check = presets.check_cc("balia", MAINLINE)
    assert (check.algorithm, check.available) == ("balia", False)
    assert check.reason.startswith(
        "'balia' is not in tcp_available_congestion_control (reno bbr cubic): upstream Linux "
        "MPTCP (net/mptcp, 5.6+) has no coupled congestion control"
    )


def test_coupled_cc_is_available_on_an_out_of_tree_kernel() -> None:
    tree = ("reno", "cubic", "lia", "olia", "balia", "wvegas")
    assert presets.check_cc("olia", tree) == presets.CCCheck("olia", "olia", True, "")


def test_fully_coupled_is_the_bpf_program_fccc() -> None:
    assert [presets.cc_algorithm(n) for n in ("fccc", "fully_coupled")] == ["fccc", "fccc"]
    check = presets.check_cc("fully_coupled", ("lia", "olia"))
    assert (check.algorithm, check.available) == ("fccc", False)
    assert presets.check_cc("fccc", ("reno", "fccc")) == presets.CCCheck("fccc", "fccc", True, "")


def test_cc_algorithm_maps_presets_and_passes_names_through() -> None:
    assert [presets.cc_algorithm(n) for n in ("uncoupled", "lia", "bbr")] == ["reno", "lia", "bbr"]


def test_bpf_cc_is_unavailable_until_loaded_with_the_reason() -> None:
    assert [
        presets.check_cc(n, MAINLINE).reason.endswith(f"): {presets._BPF}") for n in ("lia", "olia")
    ] == [True, True]
    check = presets.check_cc("tcpdoor", MAINLINE)
    assert (check.algorithm, check.available) == ("door", False)
    assert check.reason.startswith(
        "'door' is not in tcp_available_congestion_control (reno bbr cubic): a BPF struct_ops "
        "program in kernel-configs/bpf, built and registered by mprig at campaign start"
    )
    assert presets.check_cc("prr", (*MAINLINE, "prr")) == presets.CCCheck("prr", "prr", True, "")


@pytest.mark.parametrize(("recovery", "cc"), [("prr", "prr_lia"), ("tcpdoor", "tcpdoor_lia")])
def test_prr_and_tcpdoor_compose_with_the_coupled_increase(recovery: str, cc: str) -> None:
    presets.check_recovery_cc(recovery, cc)  # accepted: BPF prr_lia / door_lia
    assert presets.coupling(cc) == "coupled"
    with pytest.raises(UsageError):
        presets.check_recovery_cc(recovery, "lia")  # LIA alone is not PR-R or TCP-DOOR


def test_tcpdoor_composes_with_fully_coupled_control() -> None:
    # paper 003's TCP-DOOR rows under FC-CC: BPF door_fccc, selected by `cc: tcpdoor_fccc`
    presets.check_recovery_cc("tcpdoor", "tcpdoor_fccc")
    presets.check_recovery_cc("tcpdoor", "door_fccc")
    assert [presets.coupling(c) for c in ("tcpdoor_fccc", "door_fccc")] == ["fully_coupled"] * 2
    assert presets.cc_algorithm("tcpdoor_fccc") == "door_fccc"
    with pytest.raises(UsageError, match=r"recovery 'tcpdoor' .*\(it has cc: fccc\)"):
        presets.check_recovery_cc("tcpdoor", "fccc")  # FC-CC alone is not TCP-DOOR
    with pytest.raises(UsageError):
        presets.check_recovery_cc("prr", "tcpdoor_fccc")
