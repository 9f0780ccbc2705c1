"""`mprig run` natively on a real virtual rig when every run fails for a non-transient
reason: each failure is recorded with its reason after one attempt, the campaign goes on,
the exit status is 1, `mprig status` shows why, and the rig is gone afterwards; the
campaign_start event says where the start went, phase by phase."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mprig.rig import virtual
from mprig.run import bundle

# net.mptcp.proactive_sched is on mprig's sysctl allow-list (kernel-configs/patches) but
# absent from stock kernels: validate accepts it, the host's sysctl refuses it.
CAMPAIGN = """\
name: h3native
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants:
  - {name: bad, protocol: mptcp, sysctls: {net.mptcp.proactive_sched: "1"}}
  - {name: bad_tcp, protocol: tcp, path: cell, sysctls: {net.mptcp.proactive_sched: "1"}}
traffic: {tool: iperf3, duration_s: 1}
"""


def test_failed_runs_are_recorded_and_the_campaign_goes_on(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    argv = [sys.executable, "-m", "mprig.cli", "run", str(spec), "--no-vm", "--rig", "h3n",
            "--results", str(tmp_path), "--quiet"]  # fmt: skip
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 1, p.stderr
    results = tmp_path / "h3native"
    plan = json.loads((results / "campaign.json").read_text())["plan"]
    for run in plan:
        record = bundle.read_record(results / run["run_id"])
        assert (record["status"], record["attempts"]) == ("failed", 1)
        assert record["reason"].startswith("client: `sysctl -q -w ")
        assert "net.mptcp.proactive_sched" in record["reason"]
        assert bundle.decide(results, run["run_id"], force=False).action == "run"
    ends = [json.loads(line) for line in (results / "events.jsonl").read_text().splitlines()]
    # where the campaign's start went, phase by phase (mprig/startup.py)
    start = next(e for e in ends if e["event"] == "campaign_start")["startup_s"]
    assert list(start) == ["python", "plan", "archive check", "campaign.json",
                           "congestion controls", "rig build", "ansible", "rig up",
                           "bundle check", "baseline"], start  # fmt: skip
    assert all(s >= 0 for s in start.values()) and start["ansible"] > 0, start
    assert [(e["event"], e.get("status")) for e in ends if e["event"].endswith("_end")] == [
        ("run_end", "failed"),
        ("run_end", "failed"),
        ("campaign_end", "done"),
    ]
    status = subprocess.run(
        [sys.executable, "-m", "mprig.cli", "status", str(results), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    rows = json.loads(status.stdout)
    assert (status.returncode, [r["status"] for r in rows]) == (1, ["failed", "failed"])
    assert virtual.leftovers("h3n") == []
    assert not (results / "campaign.lock").exists()
