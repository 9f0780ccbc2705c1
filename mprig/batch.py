"""Batches: many commands on one host in one SSH round trip, hosts in parallel.

A run applies some sixty commands; one SSH call each costs a quarter second on a busy
machine and more under VM emulation. The runner instead sends each host, per stage, a list
of argv (JSON on stdin) to a small Python program (`python3 -c AGENT`; Ansible needs
python3 on every host anyway) that runs them in order, stops at the first failure, starts
background commands detached in their own process group, and answers with one JSON line
per command: status, seconds, output. Every argv is still logged one by one in run.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mprig.errors import HostError
from mprig.rig.host import Host

AGENT = r"""
import json, os, signal, subprocess, sys, time
out = []
for c in json.load(sys.stdin):
    t0 = time.monotonic()
    r = {"rc": 0, "out": "", "err": "", "pid": None}
    try:
        if c.get("log"):
            f = open(c["log"], "wb")
            p = subprocess.Popen(c["argv"], stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            f.close()
            r["pid"] = p.pid
            with open(c["log"] + ".pid", "w") as f:
                f.write(str(p.pid))
        else:
            p = subprocess.Popen(c["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
            try:
                o, e = p.communicate(timeout=c["timeout"])
                r.update(rc=p.returncode, out=o.decode("utf-8", "replace"),
                         err=e.decode("utf-8", "replace"))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
                r.update(rc=-9, err="timed out after %s s" % c["timeout"])
    except FileNotFoundError as e:
        r.update(rc=127, err=str(e))
    r["seconds"] = round(time.monotonic() - t0, 3)
    out.append(r)
    if r["rc"] != 0 and c.get("check", True):
        break
json.dump(out, sys.stdout)
"""

# Background commands are children of the agent, which exits at once: they are reparented
# to init and reaped there. `stop` signals the process group (pgid == pid).
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


def run_on(host: Host, cmds: Sequence[Cmd]) -> list[Done]:
    """Run cmds in order on one host in one round trip (stops after the first failure)."""
    if not cmds:
        return []
    payload = json.dumps([_wire(c) for c in cmds]).encode()
    budget = sum(c.timeout for c in cmds if c.log is None) + 30
    r = host.run(["python3", "-I", "-S", "-c", AGENT], timeout=budget, check=False, input=payload)
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or [f"exited {r.returncode}"])[-1]
        raise HostError(host.name, f"command agent failed: {err}", transient=True)
    try:
        answers: list[dict[str, Any]] = json.loads(r.stdout)
    except ValueError:
        raise HostError(host.name, "command agent answered no JSON", transient=True) from None
    return [
        Done(host.name, c, a["rc"], a["out"], a["err"], a["seconds"], a["pid"])
        for c, a in zip(cmds, answers, strict=False)
    ]


def _wire(c: Cmd) -> dict[str, Any]:
    return {"argv": c.argv, "timeout": c.timeout, "log": c.log, "check": c.check}


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


def stop_argv(pids: Sequence[int], sig: str = "INT") -> list[str]:
    """Signal process groups, wait up to 5 s for them to exit, then KILL what is left."""
    return ["sh", "-c", STOP_SCRIPT, "mprig-stop", sig, *map(str, pids)]
