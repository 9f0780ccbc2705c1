"""A run whose rig was saturated is shown with its cause, never averaged in (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path

import report_synth as rs

from reports import results as res


def test_a_rig_limited_run_leaves_the_aggregates_and_is_listed_with_its_cause(
    tmp_path: Path,
) -> None:
    root = rs.write(tmp_path / "synth", rs.Synth(timeseries=False))
    before = res.load(root)
    victim = str(before.complete["run_id"].iloc[0])
    record_path = root / victim / "run.json"
    record = json.loads(record_path.read_text())
    record["flags"] = [*record.get("flags", []), "rig_limited"]
    record["rig_cpu"] = {
        "rig_busy": 0.97,
        "host_busy": 0.99,
        "threshold": 0.9,
        "rig_limited": True,
        "cause": "guest CPU 97% busy during the traffic (host 99%, QEMU's emulation included)",
    }
    record_path.write_text(json.dumps(record))

    after = res.load(root)

    assert victim not in set(after.complete["run_id"])
    assert len(after.complete) == len(before.complete) - 1
    row = after.failed.set_index("run_id").loc[victim]
    assert (row["status"], row["reason"]) == (
        "rig-limited",
        "rig-limited: guest CPU 97% busy during the traffic (host 99%, QEMU's emulation included)",
    )
