"""One attempt of one run, the shared pieces: what it does on the rig (Attempt: stages run
in parallel over the hosts, every command logged for run.json), what it produces
(Outcome), what every run of a campaign shares (Context), its failures, and the remote
wait loops the stages use. The stages are in run_stages.py and run_fetch.py; the
campaign loop in run.py.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mprig.campaign.plan import Run
from mprig.campaign.spec import Campaign
from mprig.errors import HostError, MprigError, ToolMissing
from mprig.rig.batch import Batch, Cmd, Done, run_batch
from mprig.rig.host import Rig
from mprig.run import commands, impair, latency, rbpm_run, timeline
from mprig.run.crossflow import shown as cross_shown
from mprig.run.progress import Reporter
from mprig.stack import isolation, knobs

RETRIES = 2  # extra attempts after an infrastructure failure


MIN_FREE_BYTES = 512 << 20  # a run does not start with less free space in the results dir


READY_TIMEOUT = 10.0  # seconds for tcpdump and the traffic server to be ready


TOOL_NOT_FOUND = 127


class RunFailed(MprigError):
    """One attempt of a run failed; `transient` failures are retried."""

    def __init__(self, message: str, *, transient: bool) -> None:
        self.transient = transient
        super().__init__(message)


class OutOfSpace(MprigError):
    """Too little disk space left in the results directory to start a run."""


@dataclass
class Attempt:
    """Everything one attempt of one run does on the rig, logged as it goes."""

    rig: Rig
    run: Run
    staging: Path  # local .<run-id>.partial directory
    routers: tuple[str, ...] = ()
    baseline: isolation.Baseline | None = None  # restored before the variant, compared after
    log: list[dict[str, Any]] = field(default_factory=list)  # run.json `commands`
    background: dict[str, dict[str, int]] = field(default_factory=dict)  # host -> kind -> pid
    done: dict[str, list[Done]] = field(default_factory=dict)  # last stage's results
    stage_s: dict[str, float] = field(default_factory=dict)  # stage name -> wall seconds
    # artifacts hashed as they were staged: name -> (size, mtime_ns, sha256), bundle.Stamp
    hashed: dict[str, tuple[int, int, str]] = field(default_factory=dict)

    def remote(self, host: str) -> str:
        return commands.remote_dir(self.rig.name, self.run.run_id, host)

    def hosts(self) -> tuple[str, ...]:
        return ("client", "server", *self.routers)

    def stage(self, name: str, b: Batch, *, check: bool = True) -> dict[str, list[Done]]:
        """Run one stage (hosts in parallel), log every command, raise on a failure."""
        t0 = time.monotonic()
        try:
            self.done = run_batch(self.rig.hosts, b)
        except HostError as e:
            raise RunFailed(str(e), transient=e.transient) from None
        finally:
            self.stage_s[name] = round(time.monotonic() - t0, 3)
        for host, results in self.done.items():
            for d in results:
                self.log.append(logged(d))
                if d.pid is not None:
                    self.background.setdefault(host, {})[_kind(d.cmd)] = d.pid
        if check:
            raise_first_failure(self.done)
        return self.done

    def output(self, host: str, argv: list[str]) -> str:
        """stdout of the last command with this argv on host in the last stage (or of the
        fused command that ran it)."""
        found = [
            d.stdout
            for d in self.done.get(host, [])
            if d.cmd.argv == argv or tuple(argv) in d.cmd.parts
        ]
        return found[-1] if found else ""

    def save(self, name: str, text: str) -> None:
        (self.staging / name).write_text(text)


@dataclass
class Outcome:
    """What one attempt produced for run.json."""

    traffic_s: float = 0.0
    drops: dict[str, int] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    sysctls: dict[str, dict[str, str]] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # run.json `settings`
    flushed: dict[str, dict[str, int]] = field(default_factory=dict)  # TCP metrics per host
    ss_interval: dict[str, Any] = field(default_factory=dict)  # the ss sampler's achieved interval
    rig_cpu: dict[str, Any] = field(default_factory=dict)  # run.json `rig_cpu` (headroom)
    engine: dict[str, Any] = field(default_factory=dict)  # run.json `engine` (ns-3 paths only)
    attenuation: dict[str, Any] = field(default_factory=dict)  # run.json `attenuation` (lab)
    cross: dict[str, Any] = field(default_factory=dict)  # run.json `cross_traffic`
    timeline: dict[str, Any] = field(default_factory=dict)  # run.json `timeline` (timing held)


@dataclass
class Context:
    """What every run of a campaign shares."""

    campaign: Campaign
    rig: Rig
    results: Path
    reporter: Reporter
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> facts
    iperf3_mptcp_flag: bool = False
    baseline: isolation.Baseline | None = None  # the rig's settings every run starts from
    retries: int = RETRIES
    min_free_bytes: int = MIN_FREE_BYTES


def fused(b: Batch) -> Batch:
    """`b` with each host's consecutive tc commands run by one tc (impair.fuse_tc) and its
    sysctl writes done by bash builtins (knobs.fuse_sysctl)."""
    return Batch(
        {host: impair.fuse_tc(knobs.fuse_sysctl(cmds)) for host, cmds in b.by_host.items()}
    )


def _kind(cmd: Cmd) -> str:
    """Name of a background command: the log file's stem (tcpdump, ss, traffic-server)."""
    return Path(cmd.log or "").stem


def logged(d: Done) -> dict[str, Any]:
    """run.json `commands` entry; a fused command (one tc for several) lists its parts."""
    argv = latency.shown(cross_shown(rbpm_run.shown(d.cmd.argv)))  # programs' source by name
    argv = timeline.shown(argv)
    entry = {"host": d.host, "argv": argv, "returncode": d.returncode, "seconds": d.seconds}
    if d.cmd.parts:
        entry["parts"] = [list(p) for p in d.cmd.parts]
    return {**entry, "background": True} if d.cmd.log else entry


def raise_first_failure(done: dict[str, list[Done]]) -> None:
    for host, results in done.items():
        for d in results:
            if d.returncode == 0 or not d.cmd.check:
                continue
            # a fused command is shown as the commands it stands for
            argv = "; ".join(shlex.join(p) for p in d.cmd.parts or (d.cmd.argv,))
            if d.returncode == TOOL_NOT_FOUND:
                raise ToolMissing(f"{host}: {d.cmd.argv[0]} not found ({argv}); install it")
            err = (d.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            transient = d.returncode == -9 or d.cmd.transient
            raise RunFailed(f"{host}: `{argv}` exited {d.returncode}: {err}", transient=transient)


# Readiness tests for wait_cmd, bash builtins only: under VM emulation every program
# started costs 0.1-0.3 s, so the old `grep`/`ss | grep` loops with `sleep 0.05` polled
# every half second. `logged FILE TEXT`: a line of FILE contains TEXT; `listening PORT`:
# a TCP socket (MPTCP listeners included) listens on PORT, from /proc/net/tcp{,6}.
READY_TESTS = (
    'logged() { local l; while IFS= read -r l; do [[ $l == *"$2"* ]] && return 0; '
    'done < "$1"; return 1; } 2>/dev/null; '
    "listening() { local p a s f; printf -v p ':%04X' \"$1\"; "
    "for f in /proc/net/tcp /proc/net/tcp6; do while read -r _ a _ s _; do "
    '[[ $s == 0A && $a == *"$p" ]] && return 0; done < "$f"; done; return 1; } 2>/dev/null; '
)


def wait_cmd(test: str, *args: str, limit: float = READY_TIMEOUT) -> Cmd:
    """A remote wait loop: `test` (READY_TESTS functions, $1...) until it succeeds (exit
    0), `limit` seconds at most (exit 1); `read -t` on a pipe nobody writes to is the
    sleep."""
    ticks = int(limit * 50)
    loop = (
        f"{READY_TESTS}exec 3<> <(:); i=0; until {test}; do i=$((i+1)); "
        f"[ $i -gt {ticks} ] && exit 1; read -t 0.02 -u 3; done; exit 0"
    )
    return Cmd(["bash", "-c", loop, "mprig-wait", *args], timeout=limit + 5, transient=True)


def capture_interfaces(rig: Rig, host: str) -> tuple[str, ...]:
    """Where tcpdump runs on a capturing host: each of its data interfaces, never `any`."""
    ifs = commands.data_interfaces(rig).get(host, ())
    if not ifs:
        raise RunFailed(
            f"{host}: no data interfaces to capture on (set mprig_data_interfaces for it in"
            " the inventory)",
            transient=False,
        )
    return ifs
