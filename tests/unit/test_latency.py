"""The latency probe (mprig/run/latency.py): its commands per path, its log parsed, and the
per-run RTT quantiles and loss over the traffic's window."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.latency_part import latency_part
from collectors.runinfo import RunInfo
from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.rig.host import PathLink
from mprig.run import commands, latency

LINKS = (
    PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "lan0", "wan0"),
    PathLink("cell", "cellular", "wwan0", "10.1.2.2", "cell", "lan0", "wan0"),
)
SPEC = """\
name: t
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20}
  - {name: cell, kind: cellular, rate_mbit: 10}
variants:
  - name: mptcp
traffic:
  duration_s: 5
"""

# A probe's log as the probe script writes it; seq 3 got no reply, the last line was cut
# off when the probe was stopped.
LOG = """\
{"seq": 1, "sent": 100.0}
{"seq": 1, "rtt_ms": 20.5, "up_ms": 10, "down_ms": 11}
{"seq": 2, "sent": 100.1}
{"seq": 3, "sent": 100.2}
{"seq": 2, "rtt_ms": 250.0, "up_ms": 10, "down_ms": 240}
{"seq": 4, "sent": 100.3}
{"seq": 4, "rtt_ms": 30.0, "up_ms": 12, "down_ms": 18}
{"seq": 5, "sent": 100.4}
{"seq": 5, "rtt_ms": 40.0}
{"seq": 6, "se"""


def run(extra: str = "") -> plan.Run:
    return plan.expand(parse_campaign(SPEC + extra, "t.yaml"))[0]


def test_no_probe_unless_asked() -> None:
    c = commands.build(run(), LINKS, server_addr="10.1.9.2")
    assert c.background == []
    assert latency.files(run().traffic, ["wifi", "cell"]) == []


def test_one_probe_per_path_from_its_address() -> None:
    r = run("  ping_interval_ms: 50\n")
    c = commands.build(r, LINKS, server_addr="10.1.9.2")
    probe = ["python3", "-c", "latency-probe.py"]
    assert [(h, latency.shown(argv), log) for h, argv, log in c.background] == [
        ("client", [*probe, "10.1.1.2", "10.1.9.2", "50"], "ping-wifi.jsonl"),
        ("client", [*probe, "10.1.2.2", "10.1.9.2", "50"], "ping-cell.jsonl"),
    ]
    assert latency.files(r.traffic, ["wifi", "cell"]) == ["ping-wifi.jsonl", "ping-cell.jsonl"]


def test_the_runner_waits_for_each_probe_and_nothing_else() -> None:
    """A probe started late leaves the run's first seconds unprobed: an emulated run
    counted 13 of 60 echoes in a 5 s run. The runner waits for each probe's first line."""
    r = run("  ping_interval_ms: 50\n")
    c = commands.build(r, LINKS, server_addr="10.1.9.2")
    ready = latency.ready_logs(r, lambda host: f"/tmp/run/{host}")
    assert ready == [
        ("client", "/tmp/run/client/ping-wifi.jsonl"),
        ("client", "/tmp/run/client/ping-cell.jsonl"),
    ]
    assert [(h, f"/tmp/run/{h}/{log}") for h, _, log in c.background] == ready
    assert latency.ready_logs(run(), lambda host: f"/tmp/run/{host}") == []


def test_parse_pairs_sends_and_replies_and_skips_a_cut_last_line() -> None:
    echoes = latency.parse(LOG)
    assert [(e.seq, e.sent, e.rtt_ms, e.up_ms, e.down_ms) for e in echoes] == [
        (1, 100.0, 20.5, 10, 11), (2, 100.1, 250.0, 10, 240), (3, 100.2, None, None, None),
        (4, 100.3, 30.0, 12, 18), (5, 100.4, 40.0, None, None),
    ]  # fmt: skip


def test_a_bad_line_inside_the_log_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="line 2: not a probe record"):
        latency.parse('{"seq": 1, "sent": 1.0}\nPermissionError\n{"seq": 2, "sent": 1.1}\n')


def test_summary_over_the_window_only() -> None:
    echoes = latency.parse(LOG)
    assert latency.summarise(echoes, (100.05, 100.35)) == {
        "sent": 3, "lost": 1, "loss_pct": 33.333,
        "rtt_p50_ms": 30.0, "rtt_p95_ms": 250.0, "rtt_p99_ms": 250.0,
        "up_p50_ms": 10, "up_p95_ms": 12, "up_p99_ms": 12,
        "down_p50_ms": 18, "down_p95_ms": 240, "down_p99_ms": 240,
    }  # fmt: skip
    none = dict.fromkeys(
        f"{k}_{q}_ms" for k in ("rtt", "up", "down") for q in ("p50", "p95", "p99")
    )
    assert latency.summarise(echoes, (0, 1)) == {"sent": 0, "lost": 0, "loss_pct": None, **none}


def test_run_summary_reports_a_missing_log(tmp_path: Path) -> None:
    staging = tmp_path
    (staging / "ping-wifi.jsonl").write_text(LOG)
    got = latency.run_summary(staging, run("  ping_interval_ms: 50\n"), (100.0, 100.45))
    assert got["latency"]["wifi"]["rtt_p50_ms"] == 30.0
    assert got["latency"]["cell"]["error"].startswith("ping-cell.jsonl: ")
    assert got["latency_window"] == [100.0, 100.45]
    assert latency.run_summary(staging, run(), (100.0, 100.45)) == {}


def test_collector_columns_and_series_from_the_bundle(tmp_path: Path) -> None:
    (tmp_path / "ping-wifi.jsonl").write_text(LOG)
    (tmp_path / "ping-cell.jsonl").write_text("not json\n")
    record = {
        "paths": [
            {"name": "wifi", "down": {"rate_mbit": 20}},
            {"name": "cell", "down": {"rate_mbit": 10}},
        ],
        "summary": {"latency_window": [100.05, 100.35]},
    }
    part = latency_part(RunInfo(tmp_path, record))
    assert part.metrics["columns"] == {
        "ping_p50_ms.wifi": 30.0, "ping_p95_ms.wifi": 250.0, "ping_p99_ms.wifi": 250.0,
        "ping_loss_pct.wifi": 33.333, "owd_up_p50_ms.wifi": 10, "owd_down_p50_ms.wifi": 18,
    }  # fmt: skip
    assert part.problems == [
        "ping-cell.jsonl: line 1: not a probe record (Expecting value: line 1 column 1 (char 0))"
    ]
    assert list(part.series[0]["value"]) == [20.5, 250.0, 30.0, 40.0]
    assert latency_part(RunInfo(tmp_path, {**record, "summary": {}})).metrics == {}
