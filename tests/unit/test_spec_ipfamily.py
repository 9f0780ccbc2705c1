"""Campaign key paths[].family (mprig/campaign/ipfamily.py): a bad family and every combination an
IPv6 path does not support are errors naming the file, the line and the key; a variant
whose initial subflow would be IPv4 beside IPv6 paths is refused; campaigns without the key
keep every earlier run id."""

from __future__ import annotations

import pytest
from test_spec_timeline import problems  # (line, field, message) of each validate problem

from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign

PATHS = """\
name: t
paths:
  - name: wifi
    kind: wifi
    family: {wifi}
    rate_mbit: 20
  - name: cell
    kind: cellular
    family: {cell}
    rate_mbit: 10
"""
VARIANTS = """\
variants:
  - name: mptcp
"""


def campaign(wifi: str = "ipv6", cell: str = "ipv4", rest: str = VARIANTS) -> str:
    return PATHS.format(wifi=wifi, cell=cell) + rest


def test_a_bad_family_names_its_line() -> None:
    (got,) = problems(campaign(wifi="ipv7"))
    assert got[:2] == (5, "paths.wifi.family")
    assert "'ipv4' or 'ipv6'" in got[2]


def test_a_family_given_as_a_number_is_refused() -> None:
    (got,) = problems(campaign(cell="6"))
    assert got[:2] == (9, "paths.cell.family")


def test_mixed_families_with_an_ipv6_first_path_are_accepted() -> None:
    c = parse_campaign(campaign(), "x.yaml")
    assert [p.family for p in c.paths] == ["ipv6", "ipv4"]


def test_a_variant_starting_on_ipv4_beside_ipv6_is_refused() -> None:
    rest = "variants:\n  - name: m\n    paths: [cell, wifi]\n"
    (got,) = problems(campaign(rest=rest))
    assert got[:2] == (13, "variants.m.paths")
    assert "initial subflow goes over the first path (cell, ipv4)" in got[2]


def test_an_ipv4_first_path_beside_ipv6_is_refused_for_default_variants() -> None:
    (got,) = problems(campaign(wifi="ipv4", cell="ipv6"))
    assert got[0] == 5 and got[1] == "paths.wifi.family"
    assert "put an ipv6 path first" in got[2]


def test_tcp_variants_and_single_family_subsets_may_start_anywhere() -> None:
    rest = (
        "variants:\n  - {name: t4, protocol: tcp, path: cell}\n"
        "  - {name: m4, paths: [cell]}\n  - {name: m6, paths: [wifi]}\n"
    )
    assert len(parse_campaign(campaign(rest=rest), "x.yaml").variants) == 3


@pytest.mark.parametrize(
    ("rest", "want"),
    [
        (
            VARIANTS + "traffic: {tool: bulk, bytes: 1000000}\n",
            (13, "traffic.tool", "IPv6 paths carry iperf3 traffic only: the bulk agent"),
        ),
        (
            VARIANTS + "traffic: {ping_interval_ms: 100}\n",
            (13, "traffic.ping_interval_ms", "latency probe sends ICMP (IPv4) echoes"),
        ),
        (
            VARIANTS + "shared_bottleneck: {paths: [wifi, cell], rate_mbit: 10}\n",
            (13, "shared_bottleneck", "matches IPv4 only (tc `protocol ip`)"),
        ),
        (
            VARIANTS + "rig: {wifi: hwsim}\n",
            (13, "rig.wifi", "hwsim Wi-Fi link is addressed for IPv4"),
        ),
        (
            VARIANTS + "timeline:\n  - {at_s: 1, path: wifi, action: handover}\n",
            (14, "timeline[0].action", "a handover re-adds the path's endpoint"),
        ),
    ],
)
def test_unsupported_combinations_name_their_key(rest: str, want: tuple[int, str, str]) -> None:
    (got,) = problems(campaign(rest=rest))
    assert got[:2] == want[:2]
    assert want[2] in got[2]


def test_cross_traffic_on_an_ipv6_path_is_refused() -> None:
    text = campaign().replace(
        "    rate_mbit: 20\n", "    rate_mbit: 20\n    cross_traffic: [{kind: tcp}]\n"
    )
    (got,) = problems(text)
    assert got[:2] == (7, "paths.wifi.cross_traffic")
    assert "cross traffic flows open IPv4 sockets" in got[2]


def test_the_same_combinations_are_fine_on_ipv4_only() -> None:
    rest = VARIANTS + "traffic: {tool: bulk, bytes: 1000000, ping_interval_ms: 100}\n"
    assert parse_campaign(campaign(wifi="ipv4", rest=rest), "x.yaml").traffic.tool == "bulk"


def test_run_ids_hold_without_the_key_and_change_with_ipv6() -> None:
    plain = PATHS.replace("    family: {wifi}\n", "").replace("    family: {cell}\n", "")
    ids = [r.run_id for r in plan.expand(parse_campaign(plain + VARIANTS, "x.yaml"))]
    v4 = [r.run_id for r in plan.expand(parse_campaign(campaign("ipv4", "ipv4"), "x.yaml"))]
    v6 = [r.run_id for r in plan.expand(parse_campaign(campaign(), "x.yaml"))]
    assert (v4 == ids, v6 == ids) == (True, False)
