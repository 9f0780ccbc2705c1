"""`mprig run` natively with an `engine: ns3` Wi-Fi path (issue 16 parts 3-4): the run
completes over the real-time ns-3 link, run.json records the engine's lag and packets and
the matching verdict, its log is in the bundle, the report lists it, and nothing of the
rig (namespace, TAP, engine process) remains. Needs root and the engine binary, which
`make setup` builds; without the binary it fails (a skip would pass unseen).

The run itself takes about 10 s; bringing the rig up (sshd, Ansible's rig.yml) takes most of
the test's wall time (6 s on an idle 2-core machine, about 80 s on a busy one), hence the
timeout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mprig.rig import ns3link, virtual
from mprig.run import bundle

# 11g at its 6 Mbit/s mode: the lightest load for the simulator, so the test does not
# depend on the machine keeping up with 54 Mbit/s.
CAMPAIGN = """\
name: ns3native
rig: {mode: native}
paths:
  - {name: wifi, kind: wifi, engine: ns3, distance_m: 20, rate_mbit: 6, channel_model: paper003}
variants:
  - {name: tcp, protocol: tcp, path: wifi}
traffic: {tool: iperf3, duration_s: 2}
seed: 3
"""


pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_run_crosses_the_ns3_link_and_records_its_lag(tmp_path: Path) -> None:
    assert ns3link.BINARY.exists(), f"{ns3link.BINARY} is missing: run `make ns3-engine`"
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    argv = [sys.executable, "-m", "mprig.cli", "run", str(spec), "--no-vm", "--rig", "ns3it",
            "--results", str(tmp_path), "--quiet"]  # fmt: skip
    p = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert p.returncode == 0, p.stderr
    results = tmp_path / "ns3native"
    run_id = json.loads((results / "campaign.json").read_text())["plan"][0]["run_id"]
    record = bundle.read_record(results / run_id)
    engine = record["engine"]
    wifi = engine["paths"]["wifi"]
    # the data frames at the path's PHY mode (a broadcast ARP at 1 Mbit/s pulls the mean)
    phy = round(wifi["mac"]["down"]["mean_phy_rate_mbit"])
    assert (record["status"], engine["kind"], phy) == ("complete", "ns3", 6)
    assert wifi["packets"]["down_out"] > 200  # TCP data crossed ns-3 (an idle link: a few ARPs)
    assert engine["packets"] == sum(wifi["packets"].values())
    assert 0 <= wifi["lag_p95_ms"] <= wifi["lag_max_ms"]
    assert round(wifi["lag_max_ms"], 3) == engine["lag_max_ms"]  # the run's: to the microsecond
    assert ("not_realtime" in record["flags"]) == (not engine["realtime"])
    log = (results / run_id / "ns3-wifi.log").read_text()
    assert ns3link.READY in log and ns3link.parse_summary(log) == wifi
    assert virtual.leftovers("ns3it") == []
    assert subprocess.run(["pgrep", "-f", "wifi_rt.*mprig-ns3it-"], check=False).returncode == 1
