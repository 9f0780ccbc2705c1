"""`mprig run --no-vm` of the application workloads (prefix h19), end to end: the runner
starts both agents, keeps their logs in the bundle with their sha256, summarises them in
run.json, and `mprig collect` turns them into runs.parquet percentiles. tbf stands in for
netem (MPRIG_BENCH_TBF_FOR_NETEM=1): paths keep their rates but have no delay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mprig.rig import virtual
from mprig.run import bundle
from mprig.run.impair import STANDIN_ENV

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")

HEAD = """\
paths:
  - {name: wifi, kind: wifi, rate_mbit: 4, delay_ms: 10}
variants:
  - {name: mptcp, protocol: mptcp}
"""
REQUESTS = (
    HEAD
    + """\
name: h19req
traffic:
  tool: requests
  duration_s: 15
  requests: {count: 24, response: {dist: choice, sizes: [1000, 100000]}}
"""
)
# one stream at 2 Mbit/s over a path of 8, then of 1 Mbit/s
CBR = (
    HEAD
    + """\
name: h19cbr
traffic: {tool: cbr, duration_s: 3, cbr: {rate_mbit: 2, fps: 50, deadline_ms: 150}}
sweep: {axes: {paths.wifi.down.rate_mbit: [8, 1]}}
"""
)


def mprig(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, STANDIN_ENV: "1"}
    argv = [sys.executable, "-m", "mprig.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)  # fmt: skip


def run_and_collect(tmp_path: Path, text: str, name: str) -> tuple[Path, list[dict[str, Any]]]:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(text)
    p = mprig("run", str(spec), "--no-vm", "--rig", "h19", "--results", str(tmp_path),
              "--quiet", timeout=90)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert virtual.leftovers("h19") == []
    results = tmp_path / name
    plan = json.loads((results / "campaign.json").read_text())["plan"]
    records = [bundle.read_record(results / r["run_id"]) for r in plan]
    assert [(r["status"], r["attempts"]) for r in records] == [("complete", 1)] * len(plan)
    c = mprig("collect", str(results), timeout=30)
    assert c.returncode == 0, c.stderr
    return results, records


def test_requests_campaign_logs_every_request(tmp_path: Path) -> None:
    results, (record,) = run_and_collect(tmp_path, REQUESTS, "h19req")
    bundle_dir = results / record["run_id"]
    for name in ("requests.jsonl", "requests-served.json"):
        assert record["artifacts"][name] == bundle.sha256_file(bundle_dir / name)
    rows = [json.loads(x) for x in (bundle_dir / "requests.jsonl").read_text().splitlines()]
    assert [r["seq"] for r in rows] == list(range(24))
    assert all(r["ok"] and r["time_s"] > 0 for r in rows)
    s = record["summary"]
    assert (s["requests"], s["requests_completed"], s["request_failures"]) == (24, 24, 0)
    assert 0 < s["request_time_p50_ms"] <= s["request_time_p95_ms"] <= s["request_time_p99_ms"]
    row = pd.read_parquet(results / "runs.parquet").iloc[0]
    q = [row[f"request_time_{k}_s"] for k in ("p50", "p95", "p99")]
    assert q == pytest.approx([s[f"request_time_{k}_ms"] / 1e3 for k in ("p50", "p95", "p99")])
    assert (row["requests_completed"], row["request_failures"]) == (24, 0)
    # 100 KB over 4 Mbit/s: 200 ms on the wire, so p99 (a large one) is above it
    assert 0.2 < q[2] < 2, q


def test_cbr_campaign_misses_deadlines_only_over_the_slow_path(tmp_path: Path) -> None:
    results, records = run_and_collect(tmp_path, CBR, "h19cbr")
    by_rate = {r["point"]["paths.wifi.down.rate_mbit"]: r for r in records}
    fast, slow = by_rate[8]["summary"], by_rate[1]["summary"]
    assert (fast["frames"], fast["frames_received"], fast["deadline_misses"]) == (150, 150, 0)
    assert slow["miss_ratio"] > 0.5, slow
    assert fast["frame_delay_p99_ms"] < 150 < slow["frame_delay_p50_ms"], (fast, slow)
    runs = pd.read_parquet(results / "runs.parquet")
    at = {rate: runs[runs["param.paths.wifi.down.rate_mbit"] == rate].iloc[0] for rate in (8, 1)}
    assert (at[8]["frame_misses"], at[8]["frame_miss_ratio"]) == (0, 0.0)
    assert at[1]["frame_miss_ratio"] == pytest.approx(slow["miss_ratio"])
    assert runs["frame_delay_p50_s"].notna().all() and runs["request_time_p50_s"].isna().all()
