"""Trace-driven links and mid-run events on a real virtual rig, natively (prefix h18). The
host has no sch_netem, so tbf stands in (MPRIG_BENCH_TBF_FOR_NETEM=1): the trace's rate
changes are `tc qdisc change` of the tbf, which this kernel has.

One campaign, two runs on one rig: the Wi-Fi path replays experiments/traces/alt-4-12.trace
(4 and 12 Mbit/s, 2 s each) in its download direction and the cellular path goes down at
3 s. A TCP run over Wi-Fi alone must follow the trace second by second (capture, client
side); an MPTCP run over both must stop sending on the cellular subflow after the event
and keep its goodput on Wi-Fi."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mprig.impair import STANDIN_ENV
from mprig.rig import virtual

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")

TRACE = Path(__file__).parents[2] / "experiments" / "traces" / "alt-4-12.trace"
CAMPAIGN = f"""\
name: h18timeline
paths:
  - name: wifi
    kind: wifi
    trace: {{file: {TRACE}}}
    up: {{rate_mbit: 20}}
  - {{name: cell, kind: cellular, rate_mbit: 10}}
variants:
  - {{name: tcp_wifi, protocol: tcp, path: wifi}}
  - {{name: mptcp}}
traffic: {{duration_s: 8}}
timeline:
  - {{at_s: 3, path: cell, action: down}}
"""
EVENT_S = 3.0


def mprig(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, STANDIN_ENV: "1"}
    argv = [sys.executable, "-m", "mprig.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)  # fmt: skip


def per_second(run: Path, metric: str, path: str | None, host: str) -> list[float]:
    """Mbit/s of a capture series in each second of the timeline (the agent's clock)."""
    record = json.loads((run / "run.json").read_text())
    start = record["timeline"]["started"][host]
    ts = pd.read_parquet(run / "timeseries.parquet")
    ts = ts[(ts.source == "capture") & (ts.metric == metric)]
    ts = ts[ts.path == path] if path else ts[ts.path.isna()]
    rel = ts.time - start
    return [float(ts.value[(rel >= s) & (rel < s + 1)].mean() / 1e6) for s in range(8)]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("h18")
    spec = tmp / "c.yaml"
    spec.write_text(CAMPAIGN)
    p = mprig("run", str(spec), "--no-vm", "--rig", "h18", "--results", str(tmp), "--quiet",
              timeout=180)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert virtual.leftovers("h18") == []
    c = mprig("collect", str(tmp / "h18timeline"), timeout=60)
    assert c.returncode == 0, c.stderr
    return tmp / "h18timeline"


def run_dir(results: Path, variant: str) -> Path:
    (found,) = [p for p in results.iterdir() if p.name.startswith(f"{variant}-r1-")]
    return found


def test_throughput_follows_the_trace(results: Path) -> None:
    run = run_dir(results, "tcp_wifi")
    record = json.loads((run / "run.json").read_text())
    capacity = record["timeline"]["capacity"]["wifi"]
    want = [sum(v for t, v in capacity if s <= t < s + 1) / 4 for s in range(8)]
    assert [round(w) for w in want] == [4, 4, 12, 12, 4, 4, 12, 12]
    got = per_second(run, "throughput_bps", "wifi", "ap")
    ratios = [round(g / w, 2) for g, w in zip(got, want, strict=True)]
    assert all(0.75 <= r <= 1.25 for r in ratios), (got, ratios)
    timing = record["timeline"]
    # 4 trace steps in 8 s (4 and 12 Mbit/s at 0, 2, 4, 6 s) + the link down
    assert (timing["failed"], timing["changes"]) == ([], 5)
    assert 0 <= timing["late_ms"]["max"] < 100, timing  # natively: a few ms


def test_link_down_stops_its_subflow_and_mptcp_goes_on(results: Path) -> None:
    run = run_dir(results, "mptcp")
    cell = per_second(run, "throughput_bps", "cell", "cell")
    assert min(cell[: int(EVENT_S)]) > 5, cell  # the cellular subflow carried data
    assert cell[int(EVENT_S) + 1 :] == [0.0] * 4, cell  # nothing after the event
    goodput = per_second(run, "goodput_bps", None, "ap")
    # after a stall (data in flight on the dead subflow waits for reinjection), the
    # connection goes on at the Wi-Fi trace's rate: 12 Mbit/s in its last two seconds
    assert min(goodput[6:]) > 0.75 * 12, goodput
