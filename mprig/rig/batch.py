"""Batches: many commands on one host in one SSH round trip, hosts in parallel.

A run applies some sixty commands; one SSH call each costs a quarter second on a busy
machine and far more under VM emulation. The runner instead sends each host, per stage, one
bash script built here from the argv lists (each quoted with shlex), over the host's
long-lived session (mprig.rig.session): it runs them in order, stops at the first failure,
starts background commands detached in their own process group, and prints per command
its output between markers with status, times and pid. Nothing but the commands themselves
is executed (an exec costs a good fraction of a second under emulation). Every argv is
still logged one by one in run.json.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from mprig.errors import HostError
from mprig.rig.host import Host

MARK = "@@mprig"
KILLED = 137  # `timeout -s KILL` status: reported as -9
# Under VM emulation every exec costs a good fraction of a second, so the script runs
# nothing but the commands themselves: bash builtins for time, stderr and markers.
PRELUDE = 'export LC_ALL=C\nE="${TMPDIR:-/tmp}/mprig-batch.$$.err"\ntrap \'rm -f "$E"\' EXIT\n'


# Background commands lead their own process group (pgid == pid; bash's job control puts
# them there, no `setsid` program started): `stop` signals the group, waits
# until its leader is gone (or a zombie), then KILLs whatever is left. Bash builtins only
# while waiting (`read -t` on a pipe nobody writes to is the sleep): under VM emulation a
# `sleep` per poll costs 0.1-0.3 s.
STOP_FUNCTIONS = (
    'alive() { for p in "$@"; do s=; read -r s < "/proc/$p/stat" 2>/dev/null; s=${s##*) }; '
    '[ -n "$s" ] && [ "${s%% *}" != Z ] && return 0; done; return 1; }; '
    'stop() { local sig=$1 i=0; shift; for p in "$@"; do kill -s "$sig" -- "-$p" 2>/dev/null; '
    'done; while alive "$@" && [ $i -lt 250 ]; do read -t 0.02 -u 3; i=$((i+1)); done; '
    'for p in "$@"; do kill -s KILL -- "-$p" 2>/dev/null; done; }; exec 3<> <(:); '
)
STOP_SCRIPT = STOP_FUNCTIONS + 'stop "$@"; exit 0'
# `finish MICROSECONDS PID...`: commands that end by themselves get until the deadline (by
# the clock, $EPOCHREALTIME without its decimal point) before they are stopped as above;
# exit 1 says they had to be.
FINISH_SCRIPT = STOP_FUNCTIONS + (
    "now() { t=${EPOCHREALTIME//[!0-9]/}; }; now; end=$((t + $1)); shift; "
    'while alive "$@"; do now; [ "$t" -ge "$end" ] && { stop TERM "$@"; exit 1; }; '
    "read -t 0.02 -u 3; done; exit 0"
)


@dataclass(frozen=True)
class Cmd:
    """One command of a batch."""

    argv: list[str]
    timeout: float = 30.0  # seconds (foreground commands)
    log: str | None = None  # background: remote file for stdout+stderr; pid in log.pid
    check: bool = True  # a failure stops the batch
    transient: bool = False  # a failure is worth a retry (a readiness wait timing out)
    enforce_timeout: bool = False  # kill it at `timeout` (else the batch's SSH timeout bounds it)
    parts: tuple[tuple[str, ...], ...] = ()  # a fused command: the argvs it runs (one output)


@dataclass(frozen=True)
class Done:
    """What one command of a batch did."""

    host: str
    cmd: Cmd
    returncode: int  # -9: killed at its timeout; 127: not found
    stdout: str
    stderr: str
    seconds: float
    pid: int | None = None  # background commands: remote pid (= process group)


@dataclass
class Batch:
    """Commands per host for one stage of a run."""

    by_host: dict[str, list[Cmd]] = field(default_factory=dict)

    def add(self, host: str, cmd: Cmd) -> None:
        self.by_host.setdefault(host, []).append(cmd)


def script(cmds: Sequence[Cmd], token: str) -> str:
    """The bash program that runs cmds in order. Per command it prints a start marker, the
    command's stdout, an end marker (status, time, pid), its stderr and a done marker;
    `token` makes the markers impossible to forge from command output."""
    m = f"{MARK}{token}"
    lines = [PRELUDE]
    for i, c in enumerate(cmds):
        argv = shlex.join(c.argv)
        lines.append(f'printf "\\n{m} {i} %s\\n" "$EPOCHREALTIME"\n')
        if c.log:
            log, pid = shlex.quote(c.log), shlex.quote(f"{c.log}.pid")
            lines.append(f"set -m; {argv} > {log} 2>&1 < /dev/null & p=$!; set +m\n")
            lines.append(f'echo "$p" > {pid}\n')
            lines.append(': > "$E"; rc=0\n')
        elif (inline := _subshell(c)) is not None:
            lines.append(f'{inline} 2> "$E" < /dev/null; rc=$?; p=-\n')
        else:
            limit = f"timeout -s KILL {c.timeout:g} " if c.enforce_timeout else ""
            lines.append(f'{limit}{argv} 2> "$E" < /dev/null; rc=$?; p=-\n')
        lines.append(f'printf "\\n{m}-end %s %s %s\\n" "$rc" "$EPOCHREALTIME" "$p"\n')
        lines.append(f'err=; IFS= read -r -d "" err < "$E"; printf "%s\\n{m}-done\\n" "$err"\n')
        if c.check:
            lines.append('[ "$rc" -eq 0 ] || exit 0\n')
    return "".join(lines)


def _subshell(c: Cmd) -> str | None:
    """A foreground `bash -c SCRIPT [NAME [ARGS...]]` as a subshell of the batch script: the
    same program, its own options, status and `exit`, without exec-ing a second bash (the
    scripts are mprig's own constants; their arguments are quoted). Other argv: None."""
    a = c.argv
    if c.enforce_timeout or len(a) < 3 or a[0] != "bash" or a[1] != "-c":
        return None
    return f"( set -- {shlex.join(a[4:])}\n{a[2]}\n)"


def parse(host: str, cmds: Sequence[Cmd], text: str, token: str) -> list[Done]:
    """The script's output, one Done per command that ran."""
    m = re.escape(f"{MARK}{token}")
    pattern = re.compile(
        rf"\n{m} (\d+) (\S+)\n(.*?)\n{m}-end (-?\d+) (\S+) (\S+)\n(.*?)\n{m}-done\n", re.S
    )
    done = []
    for i, start, out, rc, end, pid, err in pattern.findall(text):
        code = int(rc)
        done.append(
            Done(
                host=host,
                cmd=cmds[int(i)],
                returncode=-9 if code == KILLED else code,
                stdout=out,
                stderr=err,
                seconds=round(float(end) - float(start), 3),
                pid=int(pid) if pid.isdigit() else None,
            )
        )
    return done


def run_on(host: Host, cmds: Sequence[Cmd]) -> list[Done]:
    """Run cmds in order on one host in one round trip (stops after the first failure)."""
    if not cmds:
        return []
    budget = sum(c.timeout for c in cmds if c.log is None) + 30
    token = secrets.token_hex(8)
    r = host.script(script(cmds, token), timeout=budget)
    done = parse(host.name, cmds, r.stdout, token)
    if r.returncode != 0 or not done:
        err = (r.stderr.strip().splitlines() or [f"exited {r.returncode}"])[-1]
        raise HostError(host.name, f"command batch failed: {err}", transient=True)
    return done


T = TypeVar("T")
R = TypeVar("R")


def parallel(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """fn over items, one thread each; the first exception is raised after all finish."""
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        futures = [pool.submit(fn, i) for i in items]
        errors = [f.exception() for f in futures]
        for e in errors:
            if e is not None:
                raise e
        return [f.result() for f in futures]


def run_batch(hosts: dict[str, Host], batch: Batch) -> dict[str, list[Done]]:
    """Every host's commands, hosts in parallel; results by host."""
    names = list(batch.by_host)
    done = parallel(lambda h: run_on(hosts[h], batch.by_host[h]), names)
    return dict(zip(names, done, strict=True))


def stop_argv(pids: Sequence[int], sig: str = "TERM") -> list[str]:
    """Signal process groups, wait up to 5 s for them to exit, then KILL what is left."""
    return ["bash", "-c", STOP_SCRIPT, "mprig-stop", sig, *map(str, pids)]


def finish_argv(pids: Sequence[int], wait_s: float) -> list[str]:
    """Wait up to wait_s for commands that end by themselves (a one-off server), then stop
    those left as stop_argv does (TERM); exit 1 when any had to be stopped. The bound goes
    to bash as whole microseconds, an argument, never script text."""
    us = str(max(0, round(wait_s * 1e6)))
    return ["bash", "-c", FINISH_SCRIPT, "mprig-finish", us, *map(str, pids)]
