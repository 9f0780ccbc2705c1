"""Virtual rig layout and addressing: pure mapping of spec paths to interfaces and routers."""

from __future__ import annotations

import pytest

from mprig.campaign.spec import Direction, Path
from mprig.errors import UsageError
from mprig.rig import layout as L
from mprig.rig.host import PathLink

D = Direction(rate_mbit=10)


def path(name: str, kind: str) -> Path:
    return Path(name=name, kind=kind, down=D, up=D)  # type: ignore[arg-type]


def test_smoke_paths_get_wlan0_via_ap_and_wwan0_via_cell() -> None:
    links = L.layout([path("wifi", "wifi"), path("cell", "cellular")])
    assert links == (
        PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "lan0", "wan0"),
        PathLink("cell", "cellular", "wwan0", "10.2.1.2", "cell", "lan0", "wan0"),
    )


def test_further_paths_get_next_interfaces_and_routers_r3_on() -> None:
    paths = [
        path("c1", "cellular"),
        path("w1", "wifi"),
        path("w2", "wifi"),
        path("e1", "wired"),
        path("c2", "cellular"),
        path("e2", "wired"),
    ]
    got = [(x.name, x.client_if, x.router, x.client_addr) for x in L.layout(paths)]
    assert got == [
        ("c1", "wwan0", "cell", "10.1.1.2"),
        ("w1", "wlan0", "ap", "10.2.1.2"),
        ("w2", "wlan1", "r3", "10.3.1.2"),
        ("e1", "eth1", "r4", "10.4.1.2"),
        ("c2", "wwan1", "r5", "10.5.1.2"),
        ("e2", "eth2", "r6", "10.6.1.2"),
    ]


def test_eight_wired_paths_fit_and_nine_do_not() -> None:
    links = L.layout([path(f"e{i}", "wired") for i in range(8)])
    assert [x.router for x in links] == [f"r{i}" for i in range(3, 11)]
    assert [x.client_if for x in links] == [f"eth{i}" for i in range(1, 9)]
    with pytest.raises(UsageError, match="1 to 8 paths, got 9"):
        L.layout([path(f"e{i}", "wired") for i in range(9)])


def test_layout_is_deterministic() -> None:
    paths = [path("wifi", "wifi"), path("e", "wired"), path("cell", "cellular")]
    assert L.layout(paths) == L.layout(list(paths))


def test_addresses_of_path_three() -> None:
    assert L.addresses(3) == L.PathAddrs(
        index=3,
        client_addr="10.3.1.2",
        router_client_addr="10.3.1.1",
        router_server_addr="10.3.2.1",
        server_link_addr="10.3.2.2",
        server_if="p3",
        table=103,
    )


def test_management_addresses_are_fixed_per_host() -> None:
    got = {h: L.mgmt_addr(h) for h in ("client", "server", "ap", "cell", "r3", "r10")}
    assert got == {
        "client": "10.254.0.10",
        "server": "10.254.0.11",
        "ap": "10.254.0.12",
        "cell": "10.254.0.13",
        "r3": "10.254.0.23",
        "r10": "10.254.0.30",
    }
    with pytest.raises(ValueError, match="not a virtual rig host"):
        L.mgmt_addr("r2")


def test_hosts_and_namespaces() -> None:
    links = L.layout([path("wifi", "wifi"), path("e", "wired")])
    assert L.hosts(links) == ("client", "server", "ap", "r3")
    assert L.namespace("h2", "ctl") == "mprig-h2-ctl"


@pytest.mark.parametrize("name", ["", "A", "1abc", "a-b", "a b", "abcdefghijklm", "a;rm"])
def test_bad_rig_names_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match="rig name"):
        L.check_rig_name(name)
