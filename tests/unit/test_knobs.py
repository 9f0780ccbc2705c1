"""Stack variants as sysctls and MPTCP endpoint commands."""

from __future__ import annotations

import pytest

from mprig.campaign import presets
from mprig.campaign.spec import Variant
from mprig.errors import UsageError
from mprig.rig.host import PathLink
from mprig.stack import knobs

LINKS = (
    PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "ap-c", "ap-s"),
    PathLink("cell", "cellular", "wwan0", "10.2.1.2", "cell", "cell-c", "cell-s"),
    PathLink("w3", "wired", "eth3", "10.3.1.2", "r3", "r3-c", "r3-s"),
)


# The kernel's own reordering defaults (mprig.campaign.presets "linux"), set when a variant
# names none.
LINUX = {
    "net.ipv4.tcp_sack": "1",
    "net.ipv4.tcp_dsack": "1",
    "net.ipv4.tcp_frto": "2",
    "net.ipv4.tcp_timestamps": "1",
    "net.ipv4.tcp_recovery": "1",
    "net.ipv4.tcp_early_retrans": "3",
    "net.ipv4.tcp_reordering": "3",
    "net.ipv4.tcp_max_reordering": "300",
}


def test_default_mptcp_variant_sysctls() -> None:
    assert knobs.sysctls(Variant(name="mptcp")) == {
        **LINUX,
        "net.ipv4.tcp_congestion_control": "cubic",
        "net.mptcp.enabled": "1",
        "net.mptcp.pm_type": "0",
    }


def test_rbpm_runs_on_the_kernel_path_manager() -> None:
    assert knobs.sysctls(Variant(name="v", path_manager="rbpm"))["net.mptcp.pm_type"] == "0"


def test_preset_buffers_scheduler_and_extra_sysctls() -> None:
    v = Variant(
        name="v",
        recovery="nopr",
        cc="reno",
        scheduler="blest",
        rmem=1 << 20,
        sysctls={"net.ipv4.tcp_reordering": "10", "net.ipv4.tcp_dsack": "1"},
    )
    assert knobs.sysctls(v) == {
        "net.ipv4.tcp_sack": "1",
        "net.ipv4.tcp_dsack": "1",  # the explicit sysctl wins over the preset
        "net.ipv4.tcp_frto": "0",
        "net.ipv4.tcp_timestamps": "0",
        "net.ipv4.tcp_recovery": "0",
        "net.ipv4.tcp_early_retrans": "0",
        "net.ipv4.tcp_reordering": "10",  # likewise
        "net.ipv4.tcp_max_reordering": "3",
        "net.ipv4.tcp_congestion_control": "reno",
        "net.mptcp.enabled": "1",
        "net.mptcp.pm_type": "0",
        "net.mptcp.scheduler": "blest",
        "net.ipv4.tcp_rmem": "4096 131072 1048576",
    }


def test_unknown_recovery_preset_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="recovery 'door' is not a preset"):
        # the spec refuses it; knobs is the runner's own guard
        knobs.sysctls(Variant.model_construct(name="v", recovery="door", cc="cubic"))


def test_tcp_variant_sets_no_mptcp_sysctls_and_one_endpoint() -> None:
    v = Variant(name="tcp_cell", protocol="tcp", path="cell")
    cmds = knobs.apply_commands(v, LINKS)
    sysctl = ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in LINUX.items()),
              "net.ipv4.tcp_congestion_control=cubic"]  # fmt: skip
    limits = ["ip", "mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8"]
    assert cmds == [
        ("client", sysctl),
        ("server", sysctl),
        ("server", limits),
        ("client", knobs.ip_batch(["mptcp limits set subflows 8 add_addr_accepted 8",
                                   "mptcp endpoint flush",
                                   "mptcp endpoint add 10.2.1.2 dev wwan0 id 2 subflow"])),
    ]  # fmt: skip
    assert knobs.bind_link(v, LINKS) == LINKS[1]


def test_mptcp_subset_gets_endpoints_only_on_its_paths() -> None:
    v = Variant(name="sub", paths=("w3", "wifi"))
    client = [argv for host, argv in knobs.apply_commands(v, LINKS) if host == "client"]
    assert [line for line in client[-1][4:] if "endpoint" in line] == [
        "mptcp endpoint flush",
        "mptcp endpoint add 10.3.1.2 dev eth3 id 3 subflow",
        "mptcp endpoint add 10.1.1.2 dev wlan0 id 1 subflow",
    ]
    assert knobs.bind_link(v, LINKS) == LINKS[2]


def test_path_not_on_rig() -> None:
    with pytest.raises(UsageError, match=r"variant v: path\(s\) \['lte'\] not on the rig"):
        knobs.used_links(Variant(name="v", protocol="tcp", path="lte"), LINKS)


def test_parse_sysctl_output() -> None:
    text = (
        "net.ipv4.tcp_dsack = 1\n"
        "net.ipv4.tcp_rmem = 4096\t131072\t6291456\n"
        "net.ipv4.tcp_congestion_control = cubic\n"
    )
    assert knobs.parse_sysctl(text) == {
        "net.ipv4.tcp_dsack": "1",
        "net.ipv4.tcp_rmem": "4096 131072 6291456",
        "net.ipv4.tcp_congestion_control": "cubic",
    }


def test_small_receive_buffer_starts_at_its_maximum_and_skips_core_sysctls() -> None:
    v = Variant(name="m", rmem=50000, wmem=8192)
    out = knobs.sysctls(v)
    assert (out["net.ipv4.tcp_rmem"], out["net.ipv4.tcp_wmem"]) == (
        "4096 50000 50000",
        "4096 8192 8192",
    )
    assert not [k for k in out if k.startswith("net.core.")]


def test_an_initial_buffer_is_the_sysctls_middle_value() -> None:
    """`wmem_initial` is where an MPTCP connection's send buffer starts (it then grows only
    to its largest subflow's): the middle value of tcp_wmem, as rmem_initial of tcp_rmem."""
    v = Variant(name="m", rmem=10485760, rmem_initial=4194304, wmem=10485760,
                wmem_initial=10485760)  # fmt: skip
    out = knobs.sysctls(v)
    assert (out["net.ipv4.tcp_rmem"], out["net.ipv4.tcp_wmem"]) == (
        "4096 4194304 10485760",
        "4096 10485760 10485760",
    )
    plain = knobs.sysctls(Variant(name="m", rmem=10485760, wmem=10485760))
    assert (plain["net.ipv4.tcp_rmem"], plain["net.ipv4.tcp_wmem"]) == (
        "4096 131072 10485760",
        "4096 16384 10485760",
    )


def test_prr_recovery_sets_the_nopr_base_and_the_prr_algorithm() -> None:
    out = knobs.sysctls(Variant(name="v", protocol="tcp", path="wifi", recovery="prr", cc="prr"))
    nopr = presets.recovery_sysctls("nopr")  # its values: tests/unit/test_presets.py
    assert out == {**nopr, "net.ipv4.tcp_congestion_control": "prr"}
    with pytest.raises(UsageError, match=r"recovery 'tcpdoor' \(TCP-DOOR\) is the congestion"):
        knobs.sysctls(Variant.model_construct(name="v", recovery="tcpdoor", cc="cubic"))


def test_read_argv_records_the_variant_sysctls_and_the_available_ccs() -> None:
    argv = knobs.read_argv(Variant(name="v", cc="reno"))
    assert argv[0] == "sysctl" and argv[-1] == "net.ipv4.tcp_available_congestion_control"
    assert argv[1:-1] == list(knobs.sysctls(Variant(name="v", cc="reno")))
