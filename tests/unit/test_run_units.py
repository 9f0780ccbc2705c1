"""Runner pieces that need no rig: locks, progress events, the summary table, batches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mprig import batch, cmd_run, run
from mprig.errors import RigBusy
from mprig.progress import Reporter, fmt_duration


def test_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    lock = tmp_path / "campaign.lock"
    with run.exclusive(lock, "campaign x"):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        holder = subprocess.run(
            [sys.executable, "-c", "import fcntl,sys; f=open(sys.argv[1],'a');"
             "fcntl.flock(f, fcntl.LOCK_EX|fcntl.LOCK_NB)", str(lock)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert "BlockingIOError" in holder.stderr
    assert lock.read_text() == ""
    with run.exclusive(lock, "campaign x"):
        pass


def test_lock_held_elsewhere_is_busy(tmp_path: Path) -> None:
    lock = tmp_path / "rig.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from mprig import run\n"
         "with run.exclusive(__import__('pathlib').Path(sys.argv[1]), 'rig r'):\n"
         "    print('held', flush=True); sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        busy = pytest.raises(RigBusy, match=rf"rig r is in use by pid {holder.pid} on ")
        with busy, run.exclusive(lock, "rig r"):
            pass
    finally:
        holder.communicate("")


def test_stale_lock_of_dead_pid_is_taken_over(tmp_path: Path) -> None:
    lock = tmp_path / "campaign.lock"
    pid = 999_999_999  # above pid_max: never a live process
    lock.write_text(json.dumps({"pid": pid, "host": "h", "started": "then"}))
    said: list[str] = []
    with run.exclusive(lock, "campaign x", said.append):
        pass
    assert said == [f"taking over the stale lock {lock} of pid {pid} (no longer running)"]


def test_reporter_writes_events(tmp_path: Path) -> None:
    r = Reporter(tmp_path, quiet=True)
    r.campaign_start("c", total=3, skipped=1)
    r.run_start("a", 0, "missing")
    r.run_end("a", "complete", 10.0)
    assert r.eta() == 10.0
    r.run_start("b", 1, "failed: x")
    r.run_end("b", "failed", 20.0, "client: unreachable")
    assert r.status_line().startswith("run 3/3  elapsed 0:00  ETA 0:00  failures 1")
    r.campaign_end(status="done")
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e.get("run_id"), e.get("status")) for e in events] == [
        ("campaign_start", None, None),
        ("run_start", "a", None),
        ("run_end", "a", "complete"),
        ("run_start", "b", None),
        ("run_end", "b", "failed"),
        ("campaign_end", None, "done"),
    ]


def test_fmt_duration() -> None:
    assert (fmt_duration(5), fmt_duration(125), fmt_duration(3723)) == ("0:05", "2:05", "1:02:03")


def test_summary_rows() -> None:
    rows = [
        {"variant": "mptcp", "status": "complete", "throughput_bps": 28e6},
        {"variant": "mptcp", "status": "complete", "throughput_bps": 26e6},
        {"variant": "tcp", "status": "failed", "throughput_bps": None},
        {"variant": "tcp", "status": "complete", "throughput_bps": 19e6},
    ]
    assert cmd_run.summary_rows(rows) == [("mptcp", 27e6, 2, 0), ("tcp", 19e6, 1, 1)]


def test_batch_agent_runs_commands_in_order_and_stops_at_failure(tmp_path: Path) -> None:
    """The agent program itself, run locally (what SSH runs on each host)."""
    cmds = [
        {"argv": ["echo", "one"], "timeout": 5, "log": None, "check": True},
        {"argv": ["sh", "-c", "echo two >&2; exit 3"], "timeout": 5, "log": None, "check": True},
        {"argv": ["echo", "never"], "timeout": 5, "log": None, "check": True},
    ]
    p = subprocess.run(
        [sys.executable, "-I", "-S", "-c", batch.AGENT], input=json.dumps(cmds),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = json.loads(p.stdout)
    assert [(r["rc"], r["out"], r["err"], r["pid"]) for r in out] == [
        (0, "one\n", "", None),
        (3, "", "two\n", None),
    ]


def test_batch_agent_timeout_and_missing_tool() -> None:
    cmds = [
        {"argv": ["sleep", "5"], "timeout": 0.2, "log": None, "check": False},
        {"argv": ["no-such-tool-h3"], "timeout": 5, "log": None, "check": False},
    ]
    p = subprocess.run(
        [sys.executable, "-I", "-S", "-c", batch.AGENT], input=json.dumps(cmds),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert [r["rc"] for r in json.loads(p.stdout)] == [-9, 127]
