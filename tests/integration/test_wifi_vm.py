"""A real 802.11 hop in the virtual rig (issue 5): in the VM (Debian's stock kernel has
mac80211_hwsim), `mprig run` of a campaign with `rig: {wifi: hwsim}` builds the rig with two
simulated radios, converges playbooks/site.yml over SSH (the lab's wifi_ap role starts
hostapd with WPA2-PSK, wifi_client starts wpa_supplicant), waits for the station to
associate, and runs an MPTCP download whose subflows use both wlan0 (802.11) and wwan0.
One VM boot for the module; Ansible under software emulation makes it a few minutes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from vmcampaign import campaign_in_vm

from collectors.analyze import analyze_pcap

# About 20 minutes under software emulation (site.yml converging inside the VM): long work,
# run by `make test-long`, not by `make test` (CI's budget).
pytestmark = [pytest.mark.vm, pytest.mark.shared_vm, pytest.mark.slow, pytest.mark.long]

CAMPAIGN = """\
name: wifi
rig: {wifi: hwsim}
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants:
  - {name: mptcp, protocol: mptcp}
traffic: {tool: iperf3, direction: download, duration_s: 4}
capture: {hosts: [client], snaplen: 200}
"""
WLAN0, WWAN0 = "10.1.1.2", "10.2.1.2"  # the client's addresses on the two paths


@pytest.fixture(scope="module")
def bundle() -> Iterator[Path]:
    with campaign_in_vm(CAMPAIGN, "wifi", rig="h5wifi", timeout=1500) as results:
        runs = [p for p in results.iterdir() if (p / "run.json").exists()]
        assert len(runs) == 1
        yield runs[0]


def test_the_client_was_associated_with_the_hostapd_ap(bundle: Path) -> None:
    record = json.loads((bundle / "run.json").read_text())
    link = record["hosts"]["client"]["wifi"]["wlan0"]
    assert "Connected to" in link and "SSID: mprig-virtual" in link, link
    assert record["status"] == "complete"


def test_mptcp_subflows_carried_data_over_wlan0_and_wwan0(bundle: Path) -> None:
    conns = [c for c in analyze_pcap(bundle / "client.pcap").connections if c.subflows]
    data: dict[str, int] = {}
    for conn in conns:
        for sf in conn.subflows:
            data[sf.dst] = data.get(sf.dst, 0) + sf.packets  # download: the client receives
    assert data.get(WLAN0, 0) > 500 and data.get(WWAN0, 0) > 500, data


def test_the_rig_is_gone_afterwards(bundle: Path) -> None:
    # the run happened in the VM; on this machine nothing of the rig was ever created
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "mprig-h5wifi-" not in names
