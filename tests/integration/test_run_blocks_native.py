"""`mprig run --no-vm` of a tiny blocks campaign (prefix h13), end to end: the runner starts
the block workload (server listens and sends, client receives and logs), keeps the
per-block log in the bundle with its sha256, and `mprig collect` turns it into block delay
percentiles. The host has no sch_netem, so tbf stands in (MPRIG_BENCH_TBF_FOR_NETEM=1, as
bench/overhead does): paths keep their rates but have no delay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from mprig.rig import virtual
from mprig.run import bundle
from mprig.run.impair import STANDIN_ENV

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")

CAMPAIGN = """\
name: h13blocks
paths:
  - {name: wifi, kind: wifi, rate_mbit: 8, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 2, delay_ms: 75}
variants:
  - {name: mptcp, protocol: mptcp, rmem: 200000}
traffic: {tool: blocks, block_bytes: 8192, interval_ms: 0, duration_s: 3}
"""


def mprig(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, STANDIN_ENV: "1"}
    argv = [sys.executable, "-m", "mprig.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)  # fmt: skip


def test_blocks_campaign_runs_and_collects(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    t0 = time.monotonic()
    p = mprig("run", str(spec), "--no-vm", "--rig", "h13", "--results", str(tmp_path),
              "--quiet", timeout=55)  # fmt: skip
    assert p.returncode == 0, p.stderr
    results = tmp_path / "h13blocks"
    (run_id,) = [r["run_id"] for r in json.loads((results / "campaign.json").read_text())["plan"]]
    record = bundle.read_record(results / run_id)
    assert (record["status"], record["attempts"]) == ("complete", 1)
    arts = record["artifacts"]
    for name in ("blocks.jsonl", "blocks-sent.json"):
        assert arts[name] == bundle.sha256_file(results / run_id / name)
    sent = json.loads((results / run_id / "blocks-sent.json").read_text())
    lines = (results / run_id / "blocks.jsonl").read_text().splitlines()
    assert [json.loads(x)["seq"] for x in lines] == list(range(sent["blocks"]))
    # 3 s back to back over 10 Mbit/s: at most about 460 blocks of 8 KB
    assert 50 < sent["blocks"] < 600, sent
    assert record["summary"]["blocks"] == sent["blocks"]
    assert virtual.leftovers("h13") == []

    c = mprig("collect", str(results), timeout=30)
    assert c.returncode == 0, c.stderr
    row = pd.read_parquet(results / "runs.parquet").iloc[0]
    q = [row[f"block_delay_{k}_s"] for k in ("p50", "p95", "p99", "max")]
    assert 0 < q[0] <= q[1] <= q[2] <= q[3] < 10, q
    assert (row["blocks_missing"], row["iperf3_bps"] is pd.NA or pd.isna(row["iperf3_bps"])) == (
        0,
        True,
    )
    assert time.monotonic() - t0 < 60
