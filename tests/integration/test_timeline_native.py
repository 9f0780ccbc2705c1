"""Trace-driven links and mid-run events on a real virtual rig, natively (prefix h18). The
host has no sch_netem, so tbf stands in (MPRIG_BENCH_TBF_FOR_NETEM=1): the trace's rate
changes are `tc qdisc change` of the tbf, which this kernel has.

One campaign, two runs on one rig: the Wi-Fi path replays experiments/traces/alt-4-12.trace
(4 and 12 Mbit/s, 2 s each) in its download direction and the cellular path goes down at
3 s. A TCP run over Wi-Fi alone must follow the trace second by second (capture, client
side); an MPTCP run over both must stop sending on the cellular subflow after the event
and keep its goodput on Wi-Fi.

Then experiments/events.yaml as shipped: the cellular link down and up, its rate set, a
handover on Wi-Fi (the old subflow ends, a new one follows the gap) and a Wi-Fi walk to
the channel model's rate at 60 m. About 70 s for the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mprig.rig import virtual
from mprig.run.impair import STANDIN_ENV

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
    # connection goes on at the Wi-Fi trace's rate, 12 Mbit/s in its last two seconds: the
    # last one at 3/4 of it, the one before at half (it may still ramp up: 7.7 Mbit/s in a
    # CI run on a loaded host, 11.3 in the second after)
    assert goodput[6] > 0.5 * 12 and goodput[7] > 0.75 * 12, goodput


@pytest.fixture(scope="module")
def events_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """experiments/events.yaml as shipped (one MPTCP run, 10 s), collected."""
    tmp = tmp_path_factory.mktemp("h18e")
    spec = Path(__file__).parents[2] / "experiments" / "events.yaml"
    p = mprig("run", str(spec), "--no-vm", "--rig", "h18e", "--results", str(tmp), "--quiet",
              timeout=180)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert virtual.leftovers("h18e") == []
    c = mprig("collect", str(tmp / "events"), timeout=60)
    assert c.returncode == 0, c.stderr
    return run_dir(tmp / "events", "mptcp")


def subflows(run: Path, path: str) -> dict[str, list[float]]:
    """Subflow -> Mbit/s in each second of the timeline (the client agent's clock)."""
    start = json.loads((run / "run.json").read_text())["timeline"]["started"]["client"]
    ts = pd.read_parquet(run / "timeseries.parquet")
    ts = ts[(ts.source == "capture") & (ts.metric == "throughput_bps") & (ts.path == path)]
    out = {}
    for name, part in ts.groupby("subflow"):
        rel = part.time - start
        out[str(name)] = [
            float(part.value[(rel >= s) & (rel < s + 1)].mean() / 1e6) for s in range(10)
        ]
    return out


def test_the_shipped_events_campaign(events_run: Path) -> None:
    timing = json.loads((events_run / "run.json").read_text())["timeline"]
    # 8 walk steps x 2 directions, link down and up, 2 directions of the set, 2 handover lines
    assert (timing["changes"], timing["failed"]) == (22, [])
    (cell,) = subflows(events_run, "cell").values()
    assert cell[2:4] == [0.0, 0.0], cell  # down at 2 s
    # up at 4 s: the subflow resumes at its next backed-off retransmission (RTOs of about
    # 0.3, 0.6, 1.2, 2.4 s from 2 s, so anywhere from 4 s to about 6.5 s) and slow-starts
    # from one segment; by 7 s it carries its share again.
    assert max(cell[4:7]) > 0 and cell[7] > 5, cell
    assert 0.75 * 5 <= cell[9] <= 1.25 * 5, cell  # set to 5 Mbit/s at 8 s
    old, new = sorted(subflows(events_run, "wifi").values(), key=lambda s: -s[0])
    # the handover at 6 s removed it: nothing from 8 s on. Second 7 is left out: in one CI run
    # (2026-11-29, host fully loaded) the old subflow still delivered 1.43 Mbit/s in it (0 in
    # 5 runs on an idle host); the log below says when the endpoint went
    handover = [ln for ln in (events_run / "timeline-client.jsonl").read_text().splitlines()
                if "handover" in ln]  # fmt: skip
    assert old[0] > 10 and old[8:] == [0.0] * 2, (old, handover)
    assert new[:6] == [0.0] * 6 and min(new[8:]) > 0, new  # and a new one after the gap
    # the walk ended at 60 m: the channel model's 6.37 Mbit/s (tbf: rate only, no loss)
    assert 0.75 * 6.37 <= new[9] <= 1.25 * 6.37, new
