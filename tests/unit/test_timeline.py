"""A run's timeline as the runner applies it (mprig/run/timeline.py): per-host schedules of tc
and ip lines from traces and events, the timed agent (with stand-in tc and ip on PATH that
record what they are given), the timing summary, and the report's reading of both."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.errors import UsageError
from mprig.rig.layout import layout
from mprig.run import timeline
from mprig.run.impair import STANDIN_ENV
from reports import timeline_fig

ALT = Path(__file__).parents[2] / "experiments" / "traces" / "alt-4-12.trace"
HEAD = f"""\
name: t
paths:
  - {{name: wifi, kind: wifi, trace: {ALT}, up: {{rate_mbit: 20}}, delay_ms: 5}}
  - {{name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}}
  - {{name: far, kind: wifi, rate_mbit: 54, distance_m: 10, wifi_standard: 11g}}
variants: [{{name: mptcp}}, {{name: tcp, protocol: tcp, path: cell}}]
traffic: {{duration_s: 8}}
"""


def steps(events: str, variant: int = 0) -> dict[str, list[timeline.Step]]:
    runs = plan.expand(parse_campaign(HEAD + "timeline:\n" + events, "c.yaml"))
    run = next(r for r in runs if r.variant.name == ("mptcp", "tcp")[variant])
    links = layout(run.paths)
    return timeline.schedules(run.paths, links, run.timeline, run.variant, 8)


def test_the_trace_becomes_netem_changes_with_the_whole_direction_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(STANDIN_ENV, raising=False)
    got = steps("  - {at_s: 3, path: wifi, action: set, delay_ms: 50, direction: down}\n")
    assert [(t, line) for t, _, line, _ in got["ap"]] == [
        (0.0, "qdisc change dev lan0 root netem delay 5ms rate 3.984mbit limit 1002"),
        (2.0, "qdisc change dev lan0 root netem delay 5ms rate 12mbit limit 1005"),
        (3.0, "qdisc change dev lan0 root netem delay 50ms rate 12mbit limit 1050"),
        (4.0, "qdisc change dev lan0 root netem delay 50ms rate 3.984mbit limit 1017"),
        (6.0, "qdisc change dev lan0 root netem delay 50ms rate 12mbit limit 1050"),
    ]  # the limit holds the delay line at each rate (impair.netem_limit)
    assert got["ap"][2][3] == "set wifi: delay_ms 50 (down)"
    assert set(got) == {"ap"}  # the other paths do not change


def test_the_tbf_stand_in_changes_its_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STANDIN_ENV, "1")
    got = steps("  - {at_s: 1, path: cell, action: set, rate_mbit: 2}\n")
    assert [line for _, _, line, _ in got["cell"]] == [
        "qdisc change dev lan0 root tbf rate 2mbit burst 32kb latency 400ms",
        "qdisc change dev wan0 root tbf rate 2mbit burst 32kb latency 400ms",
    ]


def test_link_and_handover_events() -> None:
    events = (
        "  - {at_s: 1, path: cell, action: down}\n"
        "  - {at_s: 2, path: cell, action: up}\n"
        "  - {at_s: 3, path: cell, action: handover, gap_s: 0.5}\n"
    )
    got = steps(events)
    assert [(t, tool, line) for t, tool, line, _ in got["cell"]] == [
        (1.0, "ip", "link set dev lan0 down"),
        (2.0, "ip", "link set dev lan0 up"),
    ]
    assert [(t, line) for t, _, line, _ in got["client"]] == [
        (3.0, "mptcp endpoint delete id 2"),
        (3.5, "mptcp endpoint add 10.2.1.2 dev wwan0 id 2 subflow"),
    ]
    assert "client" not in steps(events, variant=1)  # a tcp run has no endpoint to move


def test_a_walk_moves_through_the_channel_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STANDIN_ENV, raising=False)
    got = steps("  - {at_s: 1, path: far, action: walk, to_m: 90, over_s: 2}\n")
    down = [(t, label, line) for t, _, line, label in got["r3"] if label.endswith("(down)")]
    assert [(t, label) for t, label, _ in down] == [
        (1.5, "walk far: 30 m (down)"), (2.0, "walk far: 50 m (down)"),
        (2.5, "walk far: 70 m (down)"), (3.0, "walk far: 90 m (down)"),
    ]  # fmt: skip
    rates = [float(line.split(" rate ")[1].split("mbit")[0]) for _, _, line in down]
    assert rates == sorted(rates, reverse=True) and rates[0] > rates[-1], rates
    assert " loss " in down[-1][2], down[-1]  # at 90 m the model loses frames


def test_too_long_a_schedule_is_refused() -> None:
    many = [(i / 10, "tc", "qdisc change dev lan0 root tbf rate 1mbit", "x") for i in range(2000)]
    with pytest.raises(UsageError, match="raise the trace's bin_ms"):
        timeline.agent_argv(many)


def _stand_ins(tmp_path: Path) -> dict[str, str]:
    """tc and ip reading a batch from stdin as the real ones do under `-force -batch -`:
    each line (the agent's markers, `show dev mprig-none`, aside) is appended to
    tmp_path/calls as `<tool> <line>`; a line saying `fail` or `mprig-none` fails with the
    real tools' stderr report (`Command failed -:<n>`)."""
    for tool in ("tc", "ip"):
        exe = tmp_path / tool
        exe.write_text(
            "#!/bin/sh\nn=0\nwhile IFS= read -r line; do\n  n=$((n+1))\n"
            f'  case "$line" in *mprig-none*) ;; *) echo "{tool} $line" >>{tmp_path}/calls;; esac\n'
            '  case "$line" in *fail*|*mprig-none*) echo bad >&2; echo "Command failed -:$n" >&2;;'
            " esac\ndone\n"
        )
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}


def test_the_agent_writes_each_moment_to_one_open_batch_and_logs_every_change(
    tmp_path: Path,
) -> None:
    plan_ = [
        (0.0, "tc", "qdisc change dev a root tbf rate 1mbit", "trace p: 1 Mbit/s (down)"),
        (0.0, "tc", "qdisc change dev b root tbf rate 1mbit", "trace p: 1 Mbit/s (up)"),
        (0.0, "ip", "link set dev a down", "link down p"),
        (0.2, "ip", "fail", "link up p"),
        (0.3, "ip", "link set dev a up", "link up p"),
    ]
    argv = timeline.agent_argv(plan_)
    agent = subprocess.Popen(argv, env=_stand_ins(tmp_path), stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    ready = json.loads(agent.stdout.readline())  # Python is up; nothing applied before the go
    assert (ready["event"], (tmp_path / "calls").exists()) == ("ready", False)
    agent.send_signal(signal.SIGUSR1)
    stdout, _ = agent.communicate(timeout=30)
    assert agent.returncode == 0
    done = subprocess.CompletedProcess(argv, 0, stdout)
    calls = (tmp_path / "calls").read_text().split("\n")
    assert [c for c in calls if c] == [
        "tc qdisc change dev a root tbf rate 1mbit",
        "tc qdisc change dev b root tbf rate 1mbit",
        "ip link set dev a down",
        "ip fail",
        "ip link set dev a up",
    ]
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert [x["event"] for x in lines] == ["start", *["change"] * 5]
    assert [(x["t"], x["rc"]) for x in lines[1:]] == [
        (0.0, 0),
        (0.0, 0),
        (0.0, 0),
        (0.2, 1),
        (0.3, 0),
    ]
    assert all(x["done"] >= x["issued"] >= x["t"] for x in lines[1:]), lines
    got = timeline.summary({"ap": done.stdout})
    assert (got["changes"], got["failed"], got["start_skew_ms"]) == (5, ["ap: fail: bad"], 0)
    assert got["late_ms"]["max"] == max(round((x["done"] - x["t"]) * 1000, 3) for x in lines[1:])
    started = lines[0]["realtime"] - 1.0  # the run started a second before the agent
    shown = timeline_fig.events(done.stdout, started, "x")
    assert [(round(t), k) for t, k in shown] == [
        (1, "link down p"),
        (1, "link up p"),
        (1, "link up p"),
    ]


@pytest.mark.skipif(shutil.which("tc") is None, reason="needs iproute2's tc")
def test_a_failed_change_shows_with_its_line_through_the_real_tc() -> None:
    """The real `tc -force -batch -` (no root: a missing device and a show): the failed
    change is reported with tc's message, the next line still runs."""
    plan_ = [
        (
            0.0,
            "tc",
            "qdisc change dev mprig-nodev root tbf rate 1mbit burst 32kb latency 400ms",
            "bad (down)",
        ),
        (0.0, "tc", "qdisc show dev lo", "show"),
        (0.1, "tc", "qdisc show dev mprig-nodev2", "bad again"),
        (0.2, "tc", "qdisc show dev lo", "show again"),
    ]
    agent = subprocess.Popen(timeline.agent_argv(plan_), stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    assert json.loads(agent.stdout.readline())["event"] == "ready"
    agent.send_signal(signal.SIGUSR1)
    stdout, _ = agent.communicate(timeout=30)
    lines = [json.loads(x) for x in stdout.splitlines()][1:]
    assert [(x["rc"], x["err"]) for x in lines] == [
        (1, 'Cannot find device "mprig-nodev"'),
        (0, ""),
        (1, 'Cannot find device "mprig-nodev2"'),
        (0, ""),
    ]
    assert timeline.summary({"r": stdout})["failed"] == [
        f'r: {plan_[0][2]}: Cannot find device "mprig-nodev"',
        'r: qdisc show dev mprig-nodev2: Cannot find device "mprig-nodev2"',
    ]


def test_summary_percentiles() -> None:
    log = [json.dumps({"event": "change", "t": 0, "done": d / 1000, "rc": 0, "line": "x"})
           for d in range(1, 101)]  # fmt: skip
    got = timeline.summary({"h": "\n".join(log)})
    assert got["late_ms"] == {"p50": 50.5, "p95": 96.0, "max": 100.0}


def test_the_capacity_line_starts_where_the_router_agent_started() -> None:
    record = {
        "timings": {"started": 100.0},
        "links": [{"name": "wifi", "router": "ap"}],
        "timeline": {"started": {"ap": 102.5}, "capacity": {"wifi": [[0, 4], [2, 12]]}},
    }
    assert timeline_fig.capacity_lines(record) == {"wifi": ([2.5, 4.5, 6.5], [4.0, 12.0, 12.0])}
    assert timeline_fig.capacity_lines({"timings": {"started": 1}}) == {}


def test_a_handovers_new_subflow_gets_its_own_line() -> None:
    import pandas as pd

    rows = [  # (t, metric, path, subflow): wifi's subflow replaced, cell's kept
        (0.1, "throughput_bps", "wifi", "a:1->b:1"), (0.1, "throughput_bps", "cell", "a:1->c:1"),
        (0.2, "throughput_bps", "wifi", "a:2->b:1"), (0.2, "srtt_ms", "wifi", "a:2->b:1"),
        (0.3, "throughput_bps", pd.NA, pd.NA),
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["t", "metric", "path", "subflow"]).assign(value=1.0)
    assert timeline_fig.series_labels(frame, "metric") == [
        "wifi #1", "cell", "wifi #2", "wifi", ""
    ]  # fmt: skip
