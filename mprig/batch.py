"""Batches: many commands on one host in one SSH round trip, hosts in parallel.

A run applies some sixty commands; one SSH call each costs a quarter second on a busy
machine and far more under VM emulation. The runner instead sends each host, per stage, one
bash script built here from the argv lists (each quoted with shlex): it runs them in order,
stops at the first failure, starts background commands detached in their own session, and
prints one line per command: index, status, start and end time, pid, base64 stdout and
stderr. No interpreter starts on the host (a Python start costs a second under emulation).
Every argv is still logged one by one in run.json.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from mprig.errors import HostError
from mprig.rig.host import Host

MARK = "@@mprig"
KILLED = 137  # `timeout -s KILL` status: reported as -9
PRELUDE = (
    'D=$(mktemp -d "${TMPDIR:-/tmp}/mprig-batch.XXXXXX") || exit 99\n'
    "trap 'rm -rf \"$D\"' EXIT\n"
    'out() { printf "%s %s %s %s %s %s %s %s\\n" ' + MARK + ' "$1" "$2" "$3" "$EPOCHREALTIME" '
    '"$4" "$(base64 -w0 < "$D/o")" "$(base64 -w0 < "$D/e")"; }\n'
)


# Background commands lead their own session (pgid == pid): `stop` signals the group, waits
# until its leader is gone (or a zombie), then KILLs whatever is left.
STOP_SCRIPT = (
    'alive() { for p in "$@"; do s=$(sed "s/.*) //" "/proc/$p/stat" 2>/dev/null | cut -c1); '
    '[ -n "$s" ] && [ "$s" != Z ] && return 0; done; return 1; }; '
    'sig=$1; shift; for p in "$@"; do kill -s "$sig" -- "-$p" 2>/dev/null; done; '
    'i=0; while alive "$@" && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; '
    'for p in "$@"; do kill -s KILL -- "-$p" 2>/dev/null; done; exit 0'
)


@dataclass(frozen=True)
class Cmd:
    """One command of a batch."""

    argv: list[str]
    timeout: float = 30.0  # seconds (foreground commands)
    log: str | None = None  # background: remote file for stdout+stderr; pid in log.pid
    check: bool = True  # a failure stops the batch
    transient: bool = False  # a failure is worth a retry (a readiness wait timing out)


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


def script(cmds: Sequence[Cmd]) -> str:
    """The bash program that runs cmds in order (see the module docstring)."""
    lines = [PRELUDE]
    for i, c in enumerate(cmds):
        argv = shlex.join(c.argv)
        if c.log:
            log = shlex.quote(c.log)
            pid = shlex.quote(f"{c.log}.pid")
            lines.append(
                f"t=$EPOCHREALTIME; setsid {argv} > {log} 2>&1 < /dev/null & p=$!; "
                f'echo "$p" > {pid}; : > "$D/o"; : > "$D/e"; out {i} 0 "$t" "$p"\n'
            )
            continue
        lines.append(
            f't=$EPOCHREALTIME; timeout -s KILL {c.timeout:g} {argv} > "$D/o" 2> "$D/e" '
            f'< /dev/null; rc=$?; out {i} "$rc" "$t" -\n'
        )
        if c.check:
            lines.append('[ "$rc" -eq 0 ] || exit 0\n')
    return "".join(lines)


def parse(host: str, cmds: Sequence[Cmd], text: str) -> list[Done]:
    """The script's answer lines, one Done per command that ran."""
    done = []
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) != 8 or parts[0] != MARK:
            continue
        _, i, rc, start, end, pid, out, err = parts
        code = int(rc)
        done.append(
            Done(
                host=host,
                cmd=cmds[int(i)],
                returncode=-9 if code == KILLED else code,
                stdout=_b64(out),
                stderr=_b64(err),
                seconds=round(float(end) - float(start), 3),
                pid=int(pid) if pid.isdigit() else None,
            )
        )
    return done


def _b64(text: str) -> str:
    return base64.b64decode(text).decode("utf-8", "replace")


def run_on(host: Host, cmds: Sequence[Cmd]) -> list[Done]:
    """Run cmds in order on one host in one round trip (stops after the first failure)."""
    if not cmds:
        return []
    budget = sum(c.timeout for c in cmds if c.log is None) + 30
    r = host.run(["bash", "-c", script(cmds)], timeout=budget, check=False)
    done = parse(host.name, cmds, r.stdout)
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
    return ["sh", "-c", STOP_SCRIPT, "mprig-stop", sig, *map(str, pids)]
