"""Trace-driven links and mid-run events with netem itself, in the VM (Debian's stock kernel
has sch_netem; the native tests use tbf). One campaign of three 8 s TCP downloads, one per
path, every run with the same timeline:

- `wifi` replays experiments/traces/alt-4-12.trace (4 and 12 Mbit/s, 2 s each) through
  timed `netem change`: the TCP run over it must follow the trace second by second;
- `far` (802.11g at 54 Mbit/s) walks from 10 m to 60 m between 2 s and 4 s: the channel
  model's netem rate falls from 14.9 to 6.4 Mbit/s (0.18 % loss), and so must the TCP run's
  throughput;
- `cell` gets 40 ms more one-way delay at 4 s: the round trip's floor goes from 40 to
  120 ms, so the sender's smoothed RTT (ss; the queue only adds to the floor) must stay at
  or above 120 ms afterwards and below 110 ms before.

Every run's timing record says how late the changes were under emulation. One VM boot for
the module (about 2 minutes under software emulation); run it under
`flock /tmp/mprig-vm.lock`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from vmcampaign import campaign_in_vm

from collectors.collect import Options, collect_campaign

# `make test-long`: test_timeline_native.py checks the same behaviour in `make test` (tbf
# for netem); this one adds Debian's netem and the channel model's walk (2.3 min, one boot)
pytestmark = [pytest.mark.vm, pytest.mark.shared_vm, pytest.mark.long]

TRACE = Path(__file__).parents[2] / "experiments" / "traces" / "alt-4-12.trace"
CAMPAIGN = f"""\
name: h18vm
paths:
  - {{name: wifi, kind: wifi, delay_ms: 5, trace: {TRACE}, up: {{rate_mbit: 20}}}}
  - {{name: cell, kind: cellular, rate_mbit: 10, delay_ms: 20, limit_pkts: 50}}
  - {{name: far, kind: wifi, rate_mbit: 54, wifi_standard: 11g, distance_m: 10, delay_ms: 5}}
variants:
  - {{name: tcp_wifi, protocol: tcp, path: wifi}}
  - {{name: tcp_far, protocol: tcp, path: far}}
  - {{name: tcp_cell, protocol: tcp, path: cell}}
traffic: {{duration_s: 8}}
timeline:
  - {{at_s: 2, path: far, action: walk, to_m: 60, over_s: 2}}
  - {{at_s: 4, path: cell, action: set, delay_ms: 60}}
"""
FAR_10M, FAR_60M = 14.888, 6.373  # the channel model's netem rate (wifi.netem_for_path)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, dict[str, Any]]]:
    """variant -> run.json, with its bundle directory under `_dir`."""
    with campaign_in_vm(CAMPAIGN, "h18vm", rig="h18vm", timeout=900) as results:
        collect_campaign(results, Options())
        out = {}
        for rec_path in sorted(results.glob("*/run.json")):
            rec = json.loads(rec_path.read_text())
            assert rec["status"] == "complete", rec.get("reason")
            rec["_dir"] = rec_path.parent
            rec["_ts"] = pd.read_parquet(rec_path.parent / "timeseries.parquet")
            out[rec["variant"]["name"]] = rec
        assert sorted(out) == ["tcp_cell", "tcp_far", "tcp_wifi"]
        yield out


def series(rec: dict[str, Any], source: str, metric: str, path: str, host: str) -> pd.DataFrame:
    """t (s on the timeline: from the host's agent start) and value of one series."""
    ts = rec["_ts"]
    ts = ts[(ts.source == source) & (ts.metric == metric) & (ts.path == path)]
    start = rec["timeline"]["started"][host]
    return pd.DataFrame({"t": ts.time - start, "value": ts.value}).dropna()


def mean_mbit(s: pd.DataFrame, lo: float, hi: float) -> float:
    return float(s.value[(s.t >= lo) & (s.t < hi)].mean() / 1e6)


def test_netem_follows_the_trace(runs: dict[str, dict[str, Any]]) -> None:
    rec = runs["tcp_wifi"]
    got = series(rec, "capture", "throughput_bps", "wifi", "ap")
    want = [4, 4, 12, 12, 4, 4, 12, 12]
    ratios = [round(mean_mbit(got, s, s + 1) / w, 2) for s, w in enumerate(want)]
    # the second second of each level: under software emulation each change is late by
    # 0.3-0.6 s (a `tc` started per change), which smears the first second of a level
    assert all(0.75 <= r <= 1.25 for r in ratios[1::2]), ratios
    assert rec["timeline"]["failed"] == [], rec["timeline"]
    print(
        "timing in the VM:",
        {k: (r["timeline"]["late_ms"], r["timeline"]["start_skew_ms"]) for k, r in runs.items()},
    )


def test_a_walk_lowers_the_rate_through_the_channel_model(runs: dict[str, dict[str, Any]]) -> None:
    got = series(runs["tcp_far"], "capture", "throughput_bps", "far", "r3")
    near, away = mean_mbit(got, 0.5, 2), mean_mbit(got, 5, 8)
    assert 0.75 * FAR_10M <= near <= 1.15 * FAR_10M, (near, away)
    assert 0.5 * FAR_60M <= away <= 1.15 * FAR_60M, (near, away)
    lines = (runs["tcp_far"]["_dir"] / "timeline-r3.jsonl").read_text().splitlines()
    entries = [json.loads(x) for x in lines]  # the agent's ready and start lines, then changes
    labels = [e["label"] for e in entries if "label" in e]
    assert labels[-2:] == ["walk far: 60 m (down)", "walk far: 60 m (up)"], labels


def test_a_delay_change_shows_in_the_senders_rtt(runs: dict[str, dict[str, Any]]) -> None:
    srtt = series(runs["tcp_cell"], "ss", "srtt_ms", "cell", "cell")
    before = srtt.value[(srtt.t >= 1) & (srtt.t < 4)]
    after = srtt.value[(srtt.t >= 5) & (srtt.t < 8)]
    # a queue of 50 packets at 10 Mbit/s adds up to 60 ms on top of the 40 ms floor
    assert 40 <= statistics.median(before) < 110 and min(after) >= 115, (list(before), list(after))
