"""mprig.rig.hwsim's pure parts: phys and interfaces from `iw` output, the link-type choice."""

from __future__ import annotations

from mprig.rig.hwsim import link_types, parse_phys, phy_interface
from mprig.spec import Direction
from mprig.spec import Path as SpecPath

# `iw dev` in a namespace that holds two radios (iw 5.19 layout: tab-indented blocks).
IW_DEV = """\
phy#10
\tInterface wlan10
\t\tifindex 12
\t\twdev 0xa00000001
\t\taddr 02:00:00:00:0a:00
\t\ttype managed
\t\ttxpower 20.00 dBm
phy#1
\tInterface wlan1
\t\tifindex 4
\t\twdev 0x100000001
\t\ttype managed
"""


def test_phys_sorted_numerically() -> None:
    iw_phy = "Wiphy phy10\n\twiphy index: 10\nWiphy phy1\n\twiphy index: 1\nWiphy phy2\n"
    assert parse_phys(iw_phy) == ["phy1", "phy2", "phy10"]
    assert parse_phys("") == []


def test_interface_of_each_phy() -> None:
    assert [phy_interface(IW_DEV, p) for p in ("phy1", "phy10", "phy0")] == [
        "wlan1",
        "wlan10",
        None,
    ]


def test_only_the_first_wifi_path_gets_a_radio() -> None:
    d = Direction(rate_mbit=10)
    paths = [
        SpecPath(name="cell", kind="cellular", down=d, up=d),
        SpecPath(name="wifi", kind="wifi", down=d, up=d),
        SpecPath(name="wifi2", kind="wifi", down=d, up=d),
    ]
    assert link_types(paths) == {"wifi": "hwsim"}
    assert link_types(paths[:1]) == {}
