"""mprig.rig.hwsim's pure parts: phys and interfaces from `iw` output, the link-type choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig.campaign.spec import Direction
from mprig.campaign.spec import Path as SpecPath
from mprig.rig.hwsim import link_types, parse_phys, phy_interface

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


def test_a_campaign_that_wants_hwsim_gets_vm_mode_where_the_kernel_lacks_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mprig.rig import vmprobe

    monkeypatch.delenv(vmprobe.IN_VM_ENV, raising=False)
    monkeypatch.setattr(vmprobe, "find_kernel", lambda: Path("/boot/vmlinuz-6.1.0-56-amd64"))
    monkeypatch.setattr(vmprobe, "netem_available", lambda: True)
    monkeypatch.setattr(vmprobe, "hwsim_available", lambda: False)
    assert vmprobe.choose_mode("auto")[0] == "native"
    mode, why = vmprobe.choose_mode("auto", hwsim=True)
    assert (mode, why.startswith("mac80211_hwsim is missing")) == ("vm", True)
    monkeypatch.setattr(vmprobe, "netem_available", lambda: False)
    assert vmprobe.choose_mode("auto", hwsim=True)[1].startswith("sch_netem and mac80211_hwsim are")
    monkeypatch.setattr(vmprobe, "netem_available", lambda: True)
    monkeypatch.setattr(vmprobe, "hwsim_available", lambda: True)
    assert vmprobe.choose_mode("auto", hwsim=True)[0] == "native"


def test_rig_wifi_is_veth_or_hwsim(tmp_path: Path) -> None:
    from mprig.campaign.spec import load_campaign
    from mprig.errors import SpecError

    base = "name: w\npaths: [{name: wifi, kind: wifi, rate_mbit: 10}]\n"
    base += "variants: [{name: m, protocol: mptcp}]\n"
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(base + "rig: {wifi: hwsim}\n")
    bad.write_text(base + "rig: {wifi: ath9k}\n")
    assert load_campaign(good).rig.wifi == "hwsim"
    with pytest.raises(SpecError, match=r"bad.yaml:4.*rig.wifi"):
        load_campaign(bad)


def test_run_records_each_wireless_interface_link() -> None:
    from mprig.run.run_rigstate import parse_wifi

    out = (
        "@@wifi wlan0\nConnected to 02:00:00:00:00:00 (on wlan0)\n\tSSID: mprig-virtual\n"
        "@@wifi wlan1\nNot connected.\n"
    )
    assert parse_wifi(out) == {
        "wlan0": "Connected to 02:00:00:00:00:00 (on wlan0)\n\tSSID: mprig-virtual",
        "wlan1": "Not connected.",
    }
    assert parse_wifi("") == {}
