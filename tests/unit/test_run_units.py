"""Runner pieces that need no rig: locks, progress events, the summary table, batches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mprig.cli import cmd_status
from mprig.errors import RigBusy
from mprig.rig import batch
from mprig.rig.host import Result
from mprig.rig.session import Session, loop_command
from mprig.run import runner as run
from mprig.run.progress import Reporter, fmt_duration


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
    assert not lock.exists()
    with run.exclusive(lock, "campaign x"):
        pass


def test_lock_held_elsewhere_is_busy(tmp_path: Path) -> None:
    lock = tmp_path / "rig.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from mprig.run import runner as run\n"
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
        {"variant": "tcp", "status": "missing", "throughput_bps": None},
        {"variant": "tcp", "status": "interrupted", "throughput_bps": None},
        {"variant": "tcp", "status": "corrupt", "throughput_bps": None},
    ]
    # (variant, mean, n, failed, not run): an interrupted campaign's unrun runs are not failures
    assert cmd_status.summary_rows(rows) == [("mptcp", 27e6, 2, 0, 0), ("tcp", 19e6, 1, 2, 2)]


class LocalHost:
    """A Host that runs on this machine what SSH runs on a rig host: argv directly, scripts
    over a real mprig session (the same remote bash loop, started locally)."""

    name = "local"
    session = Session(loop_command)

    def run(self, argv: list[str], *, timeout: float = 30, check: bool = True,
            input: bytes | None = None) -> Result:  # fmt: skip
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        return Result(tuple(argv), p.returncode, p.stdout, p.stderr, 0.0)

    def script(self, text: str, *, timeout: float = 30) -> Result:
        code, out, err = self.session.run(text, timeout=timeout)
        return Result(("bash",), code, out.decode(), err, 0.0)


def test_batch_runs_commands_in_order_and_stops_at_failure() -> None:
    cmds = [
        batch.Cmd(["echo", "one two"]),
        batch.Cmd(["sh", "-c", "printf 'x\\ny' >&2; exit 3"]),
        batch.Cmd(["echo", "never"]),
    ]
    done = batch.run_on(LocalHost(), cmds)  # type: ignore[arg-type]
    assert [(d.cmd, d.returncode, d.stdout, d.stderr, d.pid) for d in done] == [
        (cmds[0], 0, "one two\n", "", None),
        (cmds[1], 3, "", "x\ny", None),
    ]


def test_batch_output_is_returned_byte_for_byte() -> None:
    tricky = "no newline at the end\n\n@@mprig 0 1.0\n@@mprig-end 0 1 -\n\t x"
    cmds = [batch.Cmd(["printf", "%s", tricky]), batch.Cmd(["printf", "\n\n"])]
    done = batch.run_on(LocalHost(), cmds)  # type: ignore[arg-type]
    assert [(d.stdout, d.stderr, d.returncode) for d in done] == [(tricky, "", 0), ("\n\n", "", 0)]


def test_batch_timeout_missing_tool_and_background(tmp_path: Path) -> None:
    log = tmp_path / "bg.log"
    cmds = [
        batch.Cmd(["sleep", "5"], timeout=0.2, check=False, enforce_timeout=True),
        batch.Cmd(["no-such-tool-h3"], check=False),
        batch.Cmd(["sh", "-c", "echo started; exec sleep 30"], log=str(log)),
        batch.Cmd(["sh", "-c", 'until grep -q started "$1"; do sleep 0.01; done', "w", str(log)]),
    ]
    done = batch.run_on(LocalHost(), cmds)  # type: ignore[arg-type]
    assert [d.returncode for d in done] == [-9, 127, 0, 0]
    pid = done[2].pid
    assert pid is not None and (tmp_path / "bg.log.pid").read_text().strip() == str(pid)
    assert os.getpgid(pid) == pid  # its own process group: stop signals the group
    stop = batch.run_on(LocalHost(), [batch.Cmd(batch.stop_argv([pid]))])  # type: ignore[arg-type]
    assert stop[0].returncode == 0
    assert log.read_text() == "started\n"
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_bash_scripts_run_inside_the_batch_without_an_exec() -> None:
    """A foreground `bash -c SCRIPT NAME ARGS` runs as a subshell of the batch script (under
    VM emulation every exec costs 0.1-0.3 s): it sees the batch's unexported variables,
    gets its arguments, status and stderr as a separate bash would, and its shell options
    (`set -f`) and `exit` stay inside it."""
    cmds = [
        batch.Cmd(["bash", "-c", 'echo "${E:+inside} $# [$1] [$2]"; set -f', "n", "a b", "*"]),
        batch.Cmd(["bash", "-c", "echo oops >&2; exit 4", "n"], check=False),
        batch.Cmd(["bash", "-c", "echo /proc/sel[f]; # a trailing comment"]),
        batch.Cmd(["bash", "-c", "exit 0"]),
        batch.Cmd(["echo", "after"]),
    ]
    done = batch.run_on(LocalHost(), cmds)  # type: ignore[arg-type]
    assert [(d.returncode, d.stdout, d.stderr) for d in done] == [
        (0, "inside 2 [a b] [*]\n", ""),
        (4, "", "oops\n"),
        (0, "/proc/self\n", ""),  # the first command's set -f did not leak
        (0, "", ""),
        (0, "after\n", ""),
    ]
    sh = batch.run_on(LocalHost(), [batch.Cmd(["sh", "-c", 'echo "${E:-own shell}"'])])  # type: ignore[arg-type]
    assert sh[0].stdout == "own shell\n"  # sh -c keeps its own shell (dash semantics)


def test_status_rows_from_bundles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mprig.cli.main import main
    from mprig.run import bundle

    plan = [
        {"run_id": f"{v}-r1-0000000{i}", "variant": {"name": v}, "repetition": 1}
        for i, v in enumerate(["mptcp", "tcp", "tcp"])
    ]
    bundle.write_json(tmp_path / "campaign.json", {"format": 1, "plan": plan})
    d = bundle.partial_dir(tmp_path, plan[0]["run_id"])
    d.mkdir()
    (d / "client.pcap").write_bytes(b"x")
    bundle.commit(tmp_path, plan[0]["run_id"], {"status": "complete",
                                                 "summary": {"throughput_bps": 2.5e7}})  # fmt: skip
    bundle.partial_dir(tmp_path, plan[1]["run_id"]).mkdir()
    bundle.commit(tmp_path, plan[1]["run_id"], {"status": "failed", "reason": "client: gone"})
    assert main(["status", str(tmp_path), "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r["status"], r["reason"], r["throughput_bps"]) for r in rows] == [
        ("complete", "", 2.5e7),
        ("failed", "failed: client: gone", None),
        ("missing", "missing", None),
    ]
    assert cmd_status.summary_rows(rows) == [("mptcp", 2.5e7, 1, 0, 0), ("tcp", None, 0, 1, 1)]


def test_stop_kills_a_group_that_ignores_term_and_returns_0() -> None:
    script = "trap '' TERM; sleep 30 & echo ready; wait"
    proc = subprocess.Popen(
        ["sh", "-c", script], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # trap in place
        stop = subprocess.run(batch.stop_argv([proc.pid]), check=False, timeout=30)
        assert stop.returncode == 0  # not read -t's 142 from the last poll
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_runs_own_plumbing_starts_no_program(tmp_path: Path) -> None:
    """Under VM emulation every program started costs 0.1-0.3 s, so a batch's plumbing is
    bash's own: run directories made and removed with bash's loadable mkdir/rm (the
    bash-builtins package the Makefile installs), background commands put in their own
    process group by job control instead of `setsid`. Stand-ins for those programs early on
    PATH log every start; none may appear, while the work is still done."""
    calls = tmp_path / "started"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("mkdir", "rm", "setsid"):
        stand_in = bin_dir / tool
        stand_in.write_text(f'#!/bin/sh\necho {tool} >> {calls}\nexec /usr/bin/{tool} "$@"\n')
        stand_in.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"

    class StandInPathHost(LocalHost):
        session = Session(lambda token: ["env", f"PATH={path}", *loop_command(token)])

    run_dir, log = tmp_path / "a" / "b", tmp_path / "bg.log"
    (tmp_path / "old").mkdir()
    cmds = [
        batch.Cmd(["rm", "-rf", "--", str(tmp_path / "old"), str(tmp_path / "absent")]),
        batch.Cmd(["mkdir", "-p", str(run_dir)]),
        batch.Cmd(["mkdir", "-p", str(run_dir)]),  # exists: still 0
        batch.Cmd(["sh", "-c", "echo started; exec sleep 30"], log=str(log)),
    ]
    host = StandInPathHost()
    try:
        done = batch.run_on(host, cmds)  # type: ignore[arg-type]
        assert [d.returncode for d in done] == [0, 0, 0, 0]
        pid = done[3].pid
        assert pid is not None and os.getpgid(pid) == pid  # stop signals its group
        stop = batch.run_on(host, [batch.Cmd(batch.stop_argv([pid]))])  # type: ignore[arg-type]
        assert stop[0].returncode == 0
    finally:
        host.session.close()
    assert run_dir.is_dir() and not (tmp_path / "old").exists()
    assert not calls.exists(), f"programs started: {calls.read_text().split()}"


def test_run_dirs_are_made_by_every_host_at_once(tmp_path: Path) -> None:
    """Four hosts make their run directories under one new rig root at the same moment;
    bash's loadable `mkdir -p` (the session's) fails when a parent appears between its check
    and its mkdir, so the clean-up script must still succeed on every host, every time."""
    from mprig.run import run_stages

    enable = "enable -f /usr/lib/bash/mkdir mkdir && enable -f /usr/lib/bash/rm rm\n"
    script = enable + run_stages.CLEAN_SCRIPT
    failures = []
    for i in range(300):
        root = tmp_path / f"r{i}"
        procs = [
            subprocess.Popen(
                ["bash", "-c", script, "d", str(root), h, f"{root}/x/{h}"],
                stderr=subprocess.PIPE,
                text=True,
            )
            for h in ("client", "server", "ap", "cell")
        ]
        errs = [p.communicate()[1] for p in procs]
        failures += [e for p, e in zip(procs, errs, strict=True) if p.returncode != 0]
    assert failures == []
