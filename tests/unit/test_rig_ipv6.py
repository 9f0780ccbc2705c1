"""IPv6 paths on the virtual rig without root: the address plan (mprig/rig/addr6.py), the
layout's client addresses, the endpoints and server announcement a mixed-family variant
gets (knobs), the read-back it must match (isolation) and where iperf3 connects and
listens (commands)."""

from __future__ import annotations

from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.rig import addr6
from mprig.rig import layout as L
from mprig.rig.host import PathLink
from mprig.run import commands
from mprig.stack import isolation, knobs

CAMPAIGN = """\
name: v6
paths:
  - {name: wifi, kind: wifi, family: ipv6, rate_mbit: 20}
  - {name: cell, kind: cellular, rate_mbit: 10}
  - {name: eth, kind: wired, family: ipv6, rate_mbit: 10}
variants:
  - {name: mixed, paths: [wifi, cell]}
  - {name: v6only, paths: [wifi, eth]}
  - {name: tcp4, protocol: tcp, path: cell}
"""


def runs() -> dict[str, plan.Run]:
    return {r.variant.name: r for r in plan.expand(parse_campaign(CAMPAIGN, "v6.yaml"))}


def links() -> tuple[PathLink, ...]:
    return L.layout(parse_campaign(CAMPAIGN, "v6.yaml").paths)


def test_the_address_plan_numbers_paths_as_ipv4_does() -> None:
    a = addr6.addresses6(12)
    assert (a.client_addr, a.router_client_addr, a.router_server_addr, a.server_link_addr,
            a.client_net) == ("fd00:c:1::2", "fd00:c:1::1", "fd00:c:2::1", "fd00:c:2::2",
                              "fd00:c:1::/64")  # fmt: skip


def test_layout_gives_ipv6_paths_ula_client_addresses() -> None:
    got = [(k.name, k.client_if, k.client_addr, k.family) for k in links()]
    assert got == [
        ("wifi", "wlan0", "fd00:1:1::2", "ipv6"),
        ("cell", "wwan0", "10.2.1.2", "ipv4"),
        ("eth", "eth1", "fd00:3:1::2", "ipv6"),
    ]


def test_a_mixed_variant_announces_the_servers_ipv4_address_and_meshes_ipv4() -> None:
    cmds = knobs.apply_commands(runs()["mixed"].variant, links())
    server, client = cmds[-2][1][4:], cmds[-1][1][4:]
    assert server == [
        "mptcp limits set subflows 8 add_addr_accepted 8",
        "mptcp endpoint flush",
        "mptcp endpoint add 10.0.0.1 id 1 signal",
    ]
    assert client[2:] == [
        "mptcp endpoint add fd00:1:1::2 dev wlan0 id 1 subflow",
        "mptcp endpoint add 10.2.1.2 dev wwan0 id 2 subflow fullmesh",
    ]


def test_a_single_family_variant_on_an_ipv6_rig_clears_the_servers_endpoints() -> None:
    server = knobs.apply_commands(runs()["v6only"].variant, links())[-2][1][4:]
    assert server == ["mptcp limits set subflows 8 add_addr_accepted 8", "mptcp endpoint flush"]


def test_read_back_expects_the_same_endpoints() -> None:
    base = {h: isolation.HostSettings() for h in ("client", "server")}
    run = runs()["mixed"]
    setup = knobs.apply_commands(run.variant, links())
    want = isolation.expected(base, run.variant, links(), setup)
    assert (want["client"].endpoints, want["server"].endpoints) == (
        ("10.2.1.2 id 2 subflow fullmesh dev wwan0", "fd00:1:1::2 id 1 subflow dev wlan0"),
        ("10.0.0.1 id 1 signal",),
    )


def _iperf3(run: plan.Run) -> tuple[list[str], list[str]]:
    c = commands.build(run, links(), server_addr="10.0.0.1")
    assert c.server is not None and c.client is not None
    return c.server[1], c.client[1]


def test_iperf3_follows_the_initial_subflows_family() -> None:
    mixed_s, mixed_c = _iperf3(runs()["mixed"])
    v6_s, v6_c = _iperf3(runs()["v6only"])
    v4_s, v4_c = _iperf3(runs()["tcp4"])
    bind = [(s[s.index("-B") + 1], c[c.index("-c") + 1], c[c.index("-B") + 1])
            for s, c in ((mixed_s, mixed_c), (v6_s, v6_c), (v4_s, v4_c))]  # fmt: skip
    assert bind == [
        ("::", "fd00::1", "fd00:1:1::2"),  # dual-stack listener: the IPv4 joins need it
        ("fd00::1", "fd00::1", "fd00:1:1::2"),
        ("10.0.0.1", "10.0.0.1", "10.2.1.2"),
    ]


def test_ipv4_only_rigs_keep_their_commands() -> None:
    v4 = CAMPAIGN.replace(", family: ipv6", "")
    run = plan.expand(parse_campaign(v4, "v4.yaml"))[0]
    v4_links = L.layout(parse_campaign(v4, "v4.yaml").paths)
    cmds = knobs.apply_commands(run.variant, v4_links)
    assert cmds[-2] == (
        "server",
        ["ip", "mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8"],
    )
    assert all("fullmesh" not in line for line in cmds[-1][1])
