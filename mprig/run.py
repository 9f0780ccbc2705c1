"""The campaign runner: every planned run, over SSH, into a verified bundle.

Per run: apply the variant and impairments, start captures and the ss sampler, run the
traffic, stop everything, fetch artifacts into `.<run-id>.partial/`, write run.json with
the sha256 of every artifact, rename into place. Infrastructure failures are retried a
bounded number of times; SIGINT/SIGTERM tear the current run down and record it as
interrupted. See docs/running.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mprig import (
    __version__,
    apps,
    aqm,
    batch,
    bundle,
    capture,
    commands,
    headroom,
    impair,
    isolation,
    knobs,
    latency,
    rbpm_run,
    timeline,
    traffic,
    vm,
)
from mprig.batch import Batch, Cmd, Done, run_batch
from mprig.crossflow import cross_files, cross_ready, cross_record
from mprig.crossflow import shown as cross_shown
from mprig.errors import HostError, MprigError, ToolMissing, UsageError
from mprig.fsio import exclusive as exclusive  # the campaign and rig locks (cmd_run)
from mprig.plan import Run, bottleneck_json
from mprig.progress import Reporter
from mprig.rig import ns3link
from mprig.rig.host import Rig
from mprig.spec import Campaign

RETRIES = 2  # extra attempts after an infrastructure failure
MIN_FREE_BYTES = 512 << 20  # a run does not start with less free space in the results dir
READY_TIMEOUT = 10.0  # seconds for tcpdump and the traffic server to be ready
TOOL_NOT_FOUND = 127
FACTS_SCRIPT = (
    "uname -r; iperf3 --version 2>&1 | head -n1; tcpdump --version 2>&1 | head -n1; "
    "tc -V 2>&1 | head -n1; ss -V 2>&1 | head -n1; "
    "iperf3 --help 2>&1 | grep -c -- --mptcp || true"
)
PORTS = {"iperf3": traffic.IPERF3_PORT, "bulk": traffic.BULK_PORT, "blocks": traffic.BLOCKS_PORT}
PORTS |= apps.PORTS
FACT_KEYS = ("kernel", "iperf3", "tcpdump", "tc", "ss")
# The client's 802.11 links (a lab's radios, or hwsim in the virtual rig): `iw dev X link`
# per wireless interface, so a run records which AP it used, the signal and the bitrate.
WIFI_SCRIPT = (
    'for d in /sys/class/net/*/wireless; do [ -e "$d" ] || continue; '
    'i=${d%/wireless}; i=${i##*/}; echo "@@wifi $i"; iw dev "$i" link 2>&1; done; exit 0'
)


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived: tear down, record, exit 128 + signal."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


class RunFailed(MprigError):
    """One attempt of a run failed; `transient` failures are retried."""

    def __init__(self, message: str, *, transient: bool) -> None:
        self.transient = transient
        super().__init__(message)


class OutOfSpace(MprigError):
    """Too little disk space left in the results directory to start a run."""


# -- one attempt ------------------------------------------------------------------------


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
                self.log.append(_logged(d))
                if d.pid is not None:
                    self.background.setdefault(host, {})[_kind(d.cmd)] = d.pid
        if check:
            _raise_first_failure(self.done)
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


def fused(b: Batch) -> Batch:
    """`b` with each host's consecutive tc commands run by one tc (impair.fuse_tc) and its
    sysctl writes done by bash builtins (knobs.fuse_sysctl)."""
    return Batch(
        {host: impair.fuse_tc(knobs.fuse_sysctl(cmds)) for host, cmds in b.by_host.items()}
    )


def _kind(cmd: Cmd) -> str:
    """Name of a background command: the log file's stem (tcpdump, ss, traffic-server)."""
    return Path(cmd.log or "").stem


def _logged(d: Done) -> dict[str, Any]:
    """run.json `commands` entry; a fused command (one tc for several) lists its parts."""
    argv = latency.shown(cross_shown(rbpm_run.shown(d.cmd.argv)))  # programs' source by name
    argv = timeline.shown(argv)
    entry = {"host": d.host, "argv": argv, "returncode": d.returncode, "seconds": d.seconds}
    if d.cmd.parts:
        entry["parts"] = [list(p) for p in d.cmd.parts]
    return {**entry, "background": True} if d.cmd.log else entry


def _raise_first_failure(done: dict[str, list[Done]]) -> None:
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


# Remove this host's files of earlier runs (their processes are stopped by then), then
# create the run's directory $3 = $1/<run id>/<host> (commands.remote_dir under
# commands.remote_root). Every host makes the shared levels at
# the same moment, so they are made one by one, "exists" being fine for them: bash's
# loadable `mkdir -p` (the session's) fails when a parent appears between its check and
# its own mkdir, and keeps failing in that shell.
CLEAN_SCRIPT = 'rm -rf "$1"/*/"$2" && { mkdir "$1" "${3%/*}" 2>/dev/null; mkdir "$3"; }'


def setup_stage(a: Attempt, cmds: commands.RunCommands) -> None:
    """One round trip per host: fresh remote dirs and tcpdump started (it gets ready while
    the rest runs); knobs, endpoints, netem; tc, sysctl and nstat snapshots; the ss
    sampler and the traffic server; then the waits for tcpdump capturing and the server
    listening."""
    b = Batch()
    root = commands.remote_root(a.rig.name)
    for host in a.hosts():
        fresh = ["bash", "-c", CLEAN_SCRIPT, "mprig-dir", root, host, a.remote(host)]
        b.add(host, Cmd(fresh))
    waits = add_captures(a, b)
    base = a.baseline.hosts if a.baseline else {}
    setup = [*isolation.restore_sysctls(base, a.run.variant), *cmds.setup]
    for host, argv in setup:
        shows = knobs.set_and_show(argv) if host in isolation.KNOB_HOSTS else None
        b.add(host, Cmd(shows, parts=(tuple(argv),)) if shows else Cmd(argv))
    for router in a.routers:
        b.add(router, Cmd(impair.snapshot_argv()))
    for host in isolation.KNOB_HOSTS:  # routers: read from their snapshot (check_settings)
        b.add(host, Cmd(read_settings_argv(a, host, cmds)))
    for host in ("client", "server"):
        b.add(host, Cmd(capture.nstat_argv()))
    waits += add_starts(a, cmds, b)
    for host, cmd in waits:
        b.add(host, cmd)
    a.stage("setup", fused(b))
    for router in a.routers:
        a.save(f"tc-{router}-before.txt", a.output(router, impair.snapshot_argv()))
    for host in ("client", "server"):
        a.save(f"nstat-{host}-before.txt", a.output(host, capture.nstat_argv()))


def read_settings_argv(
    a: Attempt, host: str, cmds: commands.RunCommands | None = None
) -> list[str]:
    """The command reading back host's settings (without a baseline: the variant's sysctls;
    not the MPTCP limits and endpoints where the set-up's `ip` shows them, mptcp_setter)."""
    mptcp = cmds is None or mptcp_setter(cmds, host) is None
    if a.baseline is not None:
        return a.baseline.read_argv(host, offloads=False, mptcp=mptcp)
    keys = list(knobs.sysctls(a.run.variant)) if host in isolation.KNOB_HOSTS else []
    return isolation.read_argv(keys, [], mptcp=mptcp)


def mptcp_setter(cmds: commands.RunCommands, host: str) -> list[str] | None:
    """The last set-up command on host that sets MPTCP limits or endpoints, if any: the
    set-up runs it as knobs.set_and_show, whose output is the read-back of both."""
    found = [argv for h, argv in cmds.setup if h == host and knobs.set_and_show(argv)]
    return found[-1] if found and host in isolation.KNOB_HOSTS else None


def check_settings(a: Attempt, cmds: commands.RunCommands, out: Outcome) -> None:
    """Record the settings read back after the variant was applied; RunFailed naming every
    difference from what the spec (on top of the baseline) asks for."""
    got: dict[str, isolation.HostSettings] = {}
    for h in isolation.KNOB_HOSTS:
        got[h] = isolation.parse(a.output(h, read_settings_argv(a, h, cmds)))
        if (setter := mptcp_setter(cmds, h)) is not None:
            got[h] = isolation.with_mptcp(got[h], a.output(h, setter))
    for router in a.routers:
        devs = a.baseline.devices.get(router, []) if a.baseline else []
        got[router] = isolation.from_qdiscs(a.output(router, impair.snapshot_argv()), devs)
    out.settings = {h: s.as_json() for h, s in got.items()}
    own = [*knobs.sysctls(a.run.variant), knobs.AVAILABLE_CC]
    for host in isolation.KNOB_HOSTS:
        values = got[host].sysctls
        out.sysctls[host] = {k: values[k] for k in own if k in values}
    snaps = {r: a.output(r, impair.snapshot_argv()) for r in a.routers}
    if wrong := aqm.record_trees(cmds.setup, snaps, out.settings):  # the AQM trees read back
        raise RunFailed(f"qdiscs differ from the spec: {'; '.join(wrong)}", transient=False)
    if a.baseline is None:
        return
    want = isolation.expected(a.baseline.hosts, a.run.variant, a.rig.paths, cmds.setup)
    want = isolation.without_offloads(want)  # rig state, checked at the campaign's start and end
    if problems := isolation.diff(want, got):
        raise RunFailed(f"settings differ from the spec: {'; '.join(problems)}", transient=False)


def add_captures(a: Attempt, b: Batch) -> list[tuple[str, Cmd]]:
    """tcpdump on every data interface of the capturing hosts; the waits for each to
    capture (added by the caller after the rest of the stage)."""
    cap = a.run.capture
    waits: list[tuple[str, Cmd]] = []
    for h in cap.hosts if cap.enabled else ():
        d = a.remote(h)
        for i in capture_interfaces(a.rig, h):
            out = commands.pcap_path(a.rig.name, a.run.run_id, h, i)
            log = f"{d}/tcpdump-{i}.log"
            b.add(h, Cmd(capture.tcpdump_argv(out, cap.snaplen, i), log=log))
            waits.append((h, wait_cmd('logged "$1" "listening on"', log)))
    return waits


def add_starts(a: Attempt, cmds: commands.RunCommands, b: Batch) -> list[tuple[str, Cmd]]:
    """The ss sampler, the helpers and the traffic server start once the settings are in
    place (sockets take them when created); the wait for the server to listen."""
    waits: list[tuple[str, Cmd]] = []
    snd = commands.sender(a.run)
    b.add(snd, Cmd(capture.ss_sampler_argv(), log=f"{a.remote(snd)}/ss.txt"))
    for host, argv, log in cmds.background:
        b.add(host, Cmd(argv, log=f"{a.remote(host)}/{log}"))
    for host, path in cross_ready(a.run, a.remote):  # receivers up before the traffic
        waits.append((host, wait_cmd('logged "$1" "bytes"', path)))
    for host, argv, log in cmds.timed:  # Python started before the traffic (timeline.py)
        b.add(host, Cmd(argv, log=f"{a.remote(host)}/{log}"))
        ready = wait_cmd('logged "$1" "ready"', f"{a.remote(host)}/{log}", limit=60)
        waits.append((host, ready))  # a cold Python under busy emulation took over 10 s
    if cmds.server is not None:
        host, argv = cmds.server
        b.add(host, Cmd(argv, log=f"{a.remote(host)}/traffic-server.log"))
        port = PORTS[a.run.traffic.tool]
        waits.append((host, wait_cmd('listening "$1"', str(port))))
    return waits


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


def traffic_stage(a: Attempt, cmds: commands.RunCommands) -> float:
    """The traffic client, killed at its timeout; returns the traffic seconds."""
    host, argv = cmds.client
    limit = traffic.timeout_s(a.run.traffic)
    b = Batch()
    for h, _, log in cmds.timed:  # the timeline's t = 0: the agents go with the client
        b.add(h, Cmd(["kill", "-USR1", str(a.background[h][Path(log).stem])]))
    b.add(host, Cmd(argv, timeout=limit, check=False, enforce_timeout=True))
    d = a.stage("traffic", b)[host][-1]
    if d.returncode == -9:
        raise RunFailed(
            f"{host}: traffic hung past its {limit:.0f} s timeout; killed", transient=True
        )
    if d.returncode != 0:
        raise RunFailed(
            f"{host}: traffic client exited {d.returncode}: {_last_line(d.stdout + d.stderr)}",
            transient=True,
        )
    return d.seconds


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def stop_stage(a: Attempt, cmds: commands.RunCommands) -> None:
    """Stop the background commands (TERM: tcpdump writes its summary), take the after
    snapshots, remove the qdiscs. Remote files go at the next run's setup or the
    campaign's end."""
    b = Batch()
    for host, pids in a.background.items():
        b.add(host, Cmd(batch.stop_argv(list(pids.values())), timeout=15))
    a.background.clear()
    for host in ("client", "server"):
        b.add(host, Cmd(capture.nstat_argv()))
    for router in a.routers:
        b.add(router, Cmd(impair.snapshot_argv()))
    for host, argv in cmds.teardown:
        b.add(host, Cmd(argv, check=False))
    a.stage("stop", fused(b))
    for host in ("client", "server"):
        a.save(f"nstat-{host}-after.txt", a.output(host, capture.nstat_argv()))
    for router in a.routers:
        a.save(f"tc-{router}-after.txt", a.output(router, impair.snapshot_argv()))


def capture_drops(a: Attempt) -> dict[str, int]:
    """Per capturing host, the packets tcpdump's exit summary (its fetched log) says the
    kernel dropped; a host without a clean summary is left out."""
    drops: dict[str, int] = {}
    cap = a.run.capture
    for host in cap.hosts if cap.enabled else ():
        with contextlib.suppress(OSError, ValueError):
            log = (a.staging / bundle_name(host, "tcpdump.log")).read_text(errors="replace")
            drops[host] = capture.parse_tcpdump_exit(log).kernel_drops
    return drops


def remote_files(a: Attempt) -> dict[str, list[str]]:
    """Per host, the files of its remote directory that become artifacts."""
    files: dict[str, list[str]] = {}
    cap = a.run.capture
    for host in cap.hosts if cap.enabled else ():
        for i in capture_interfaces(a.rig, host):
            files.setdefault(host, []).extend([f"{host}-{i}.pcap", f"tcpdump-{i}.log"])
    files.setdefault(commands.sender(a.run), []).append("ss.txt")
    if a.run.variant.path_manager == "rbpm":
        files.setdefault("client", []).append(rbpm_run.LOG)
    tool = a.run.traffic.tool
    for host in ("client", "server"):
        sends = host == commands.sender(a.run)
        name = traffic.blocks_file(sends) if tool == "blocks" else f"{tool}-{host}.json"
        name = apps.remote_name(tool, sends) or name
        files.setdefault(host, []).append(name)
    for end, names in cross_files(a.run).items():
        files.setdefault(end, []).extend(names)
    files["client"] += latency.files(a.run.traffic, [p.name for p in a.run.paths])
    for h, log in timeline.logs(a.run, a.rig.paths).items():
        files.setdefault(h, []).append(log)
    return files


def fetch_stage(a: Attempt) -> None:
    """Each host's files (tcpdump's log with them: its exit summary says what the kernel
    dropped) streamed as one tar, unpacked under their bundle names: into staging, except
    the per-interface captures and logs, which go to a local scratch directory and reach
    staging joined (in VM mode staging is on the host's file system, where every megabyte
    written and read again costs)."""
    files = remote_files(a)
    with tempfile.TemporaryDirectory(prefix="mprig-fetch-") as scratch:
        parts = Path(scratch)

        def fetch(host: str) -> None:
            tar = parts / f"{host}.tar"
            try:
                a.rig.hosts[host].fetch_tar(a.remote(host), files[host], tar)
            except HostError as e:
                raise RunFailed(f"fetch from {host}: {e}", transient=e.transient) from None
            with tarfile.open(tar, "r:") as t:  # "r:*" would import gzip, bz2, lzma
                for name in files[host]:
                    src = t.extractfile(name)
                    if src is None:
                        raise RunFailed(f"{host}: {name} is not a file", transient=True)
                    to = parts if _joined(name) else a.staging
                    (to / bundle_name(host, name)).write_bytes(src.read())
            tar.unlink()

        t0 = time.monotonic()
        batch.parallel(fetch, list(files))
        t1 = time.monotonic()
        join_captures(a, parts)
    a.stage_s["fetch"] = round(t1 - t0, 3)
    a.stage_s["join"] = round(time.monotonic() - t1, 3)


def _joined(remote_name: str) -> bool:
    """A per-interface capture or tcpdump log: joined into one per host."""
    return remote_name.endswith(".pcap") or remote_name.startswith("tcpdump-")


def join_captures(a: Attempt, parts: Path) -> None:
    """Each capturing host's per-interface captures and tcpdump logs (in `parts`) become
    `<host>.pcap` (pcapng, one interface block per data interface, packets in time order)
    and `tcpdump-<host>.log` in staging."""
    cap = a.run.capture
    for host in cap.hosts if cap.enabled else ():
        ifs = capture_interfaces(a.rig, host)
        pcaps = [(i, parts / bundle_name(host, f"{host}-{i}.pcap")) for i in ifs]
        logs = [(i, parts / bundle_name(host, f"tcpdump-{i}.log")) for i in ifs]
        try:
            capture.merge_pcaps(pcaps, a.staging / f"{host}.pcap")
        except ValueError as e:
            raise RunFailed(f"{host}: capture: {e}", transient=True) from None
        text = {i: p.read_text(errors="replace") for i, p in logs}
        (a.staging / bundle_name(host, "tcpdump.log")).write_text(capture.join_tcpdump_logs(text))


def bundle_name(host: str, remote_name: str) -> str:
    """The artifact name in the bundle of a file in host's remote directory."""
    if remote_name in ("ss.txt", "tcpdump.log"):
        stem, ext = remote_name.split(".")
        return f"{stem}-{host}.{ext}"
    if remote_name.startswith("bulk-") or remote_name.endswith(".pcap"):
        return f".{remote_name}"  # merged into bulk.json / <host>.pcap, then removed
    if remote_name.startswith("tcpdump-"):
        return f".tcpdump-{host}-{remote_name.removeprefix('tcpdump-')}"  # joined, removed
    return remote_name


def teardown(a: Attempt, cmds: commands.RunCommands | None) -> None:
    """Leave the rig clean whatever happened: processes, qdiscs, remote files."""
    b = Batch()
    for host, pids in a.background.items():
        b.add(host, Cmd(batch.stop_argv(list(pids.values()), "KILL"), check=False))
    for host, argv in cmds.teardown if cmds else []:
        b.add(host, Cmd(argv, check=False))
    for host in a.hosts():
        b.add(host, Cmd(["rm", "-rf", "--", a.remote(host)], check=False))
    with contextlib.suppress(HostError, RunFailed):
        a.stage("teardown", fused(b), check=False)
    a.background.clear()


# -- run level --------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one attempt produced for run.json."""

    traffic_s: float = 0.0
    drops: dict[str, int] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    sysctls: dict[str, dict[str, str]] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # run.json `settings`
    ss_interval: dict[str, Any] = field(default_factory=dict)  # the ss sampler's achieved interval
    rig_cpu: dict[str, Any] = field(default_factory=dict)  # run.json `rig_cpu` (headroom)
    engine: dict[str, Any] = field(default_factory=dict)  # run.json `engine` (ns-3 paths only)
    attenuation: dict[str, Any] = field(default_factory=dict)  # run.json `attenuation` (lab)
    cross: dict[str, Any] = field(default_factory=dict)  # run.json `cross_traffic`
    timeline: dict[str, Any] = field(default_factory=dict)  # run.json `timeline` (timing held)


def attempt_run(a: Attempt, cmds: commands.RunCommands, out: Outcome) -> None:
    """One attempt, start to fetched artifacts (teardown is the caller's)."""
    out.attenuation = set_attenuation(a.run, a.rig.attenuators)
    with ns3link.running(a.rig, a.run.paths, a.run.seed, a.staging) as engines:
        setup_stage(a, cmds)
        check_settings(a, cmds, out)
        cpu = rig_cpu_reader(a)
        before = cpu()
        out.traffic_s = traffic_stage(a, cmds)
        end = time.time()  # competing flows are measured over the traffic's window
        out.rig_cpu = rig_cpu(a, before, cpu())
    out.engine = engines.summary
    stop_stage(a, cmds)
    fetch_stage(a)
    out.drops = capture_drops(a)
    out.ss_interval = ss_interval(a)
    out.summary = summarise(a)
    out.summary |= latency.run_summary(a.staging, a.run, (end - out.traffic_s, end))
    out.cross = cross_record(a.staging, a.run, (end - out.traffic_s, end), out.summary)
    out.timeline = timeline.record(a.staging, a.run, a.rig.paths)


def set_attenuation(run: Run, radios: dict[str, Any]) -> dict[str, Any]:
    """Set each attenuated Wi-Fi path to its `distance_m` (the channel model's PL(d) -
    PL(physical_m); 0 dB without a distance), read it back, and return run.json
    `attenuation`; RunFailed when the attenuator reads back another value."""
    out: dict[str, Any] = {}
    if not radios:  # the attenuator's module (urllib, ssl) costs a second under VM emulation
        return out
    from mprig.attenuator import attenuation_for_distance

    for path in run.paths:
        if (radio := radios.get(path.name)) is None:
            continue
        distance = path.distance_m or radio.physical_m
        try:
            db = attenuation_for_distance(distance, radio.physical_m, radio.radio)
        except UsageError as e:
            raise RunFailed(f"{path.name}: {e}", transient=False) from None
        applied, read = radio.attenuator.set_db(db), radio.attenuator.get_db()
        if abs(read - applied) > 0.01:
            raise RunFailed(
                f"{path.name}: {radio.attenuator.name} reads back {read:g} dB after"
                f" {applied:g} dB was set",
                transient=False,
            )
        out[path.name] = {
            "attenuator": radio.attenuator.name,
            "distance_m": float(distance),
            "physical_m": radio.physical_m,
            **{k: round(v, 3) for k, v in (("db", db), ("applied_db", applied), ("read_db", read))},
        }
    return out


def rig_cpu_reader(a: Attempt) -> Callable[[], headroom.Reading | None]:
    """Reads the rig's CPU times (and the host's in VM mode); on a lab rig the runner's
    machine is not the rig, so nothing is read."""
    if not a.rig.mode.startswith("virtual"):
        return lambda: None
    in_vm = a.rig.mode == "virtual-vm"
    return lambda: headroom.Reading.now(a.staging.parent, in_vm=in_vm)


def rig_cpu(
    a: Attempt, before: headroom.Reading | None, after: headroom.Reading | None
) -> dict[str, Any]:
    """run.json `rig_cpu`: the rig's busy share during the traffic, rig-limited or not."""
    if before is None or after is None:
        return {"rig_limited": False, "cause": "not measured on lab hosts"}
    return headroom.during(before, after, in_vm=a.rig.mode == "virtual-vm")


def ss_interval(a: Attempt) -> dict[str, Any]:
    """The interval the ss sampler achieved in this run (median, p95 of its samples)."""
    name = bundle_name(commands.sender(a.run), "ss.txt")
    try:
        text = (a.staging / name).read_text(errors="replace")
    except OSError:
        return {}
    try:
        return capture.ss_interval(capture.parse_ss_samples(text))
    except ValueError:  # a header that is not a time: the sampler was cut off mid-line
        return {}


def summarise(a: Attempt) -> dict[str, Any]:
    """Throughput from the traffic tool's own output; RunFailed when it shows a failure."""
    if a.run.traffic.tool == "iperf3":
        try:
            s = traffic.parse_iperf3((a.staging / "iperf3-client.json").read_text())
        except (OSError, ValueError) as e:
            raise RunFailed(f"client: {e}", transient=True) from None
        return {"throughput_bps": s.receiver_bps, "retransmits": s.retransmits}
    if a.run.traffic.tool == "blocks":
        return _blocks_summary(a)
    if (tool := a.run.traffic.tool) in apps.TOOLS:
        try:
            return apps.summary(a.run, a.staging)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RunFailed(f"{tool}: {e}", transient=True) from None
    return _bulk_summary(a)


def _blocks_summary(a: Attempt) -> dict[str, Any]:
    """Block delays from the receiver's log; a block that never arrived fails the run (the
    byte stream lost data), not retried."""
    try:
        sent = json.loads((a.staging / traffic.BLOCKS_SENT).read_text())["blocks"]
        d = traffic.parse_blocks((a.staging / traffic.BLOCKS_LOG).read_text(), sent)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunFailed(f"blocks: {e}", transient=True) from None
    if d.missing:
        raise RunFailed(f"blocks: {d.missing} of {sent} blocks never arrived", transient=False)
    size = a.run.traffic.block_bytes or 0
    return {
        "throughput_bps": d.n * size * 8 / max(d.span_s, 1e-9),
        "blocks": d.n,
        "block_delay_p50_ms": d.p50_ms,
        "block_delay_p99_ms": d.p99_ms,
    }


def _bulk_summary(a: Attempt) -> dict[str, Any]:
    docs = {
        h: json.loads((a.staging / f".bulk-{h}.json").read_text()) for h in ("client", "server")
    }
    for h in docs:
        (a.staging / f".bulk-{h}.json").unlink()
    down = a.run.traffic.direction == "download"
    sent, received = (docs["server"], docs["client"]) if down else (docs["client"], docs["server"])
    nbytes = a.run.traffic.bytes or 0
    problem = traffic.check_bulk(sent, received, nbytes)
    doc = {
        "bytes": nbytes,
        "sha256_sent": sent["sha256"],
        "sha256_received": received["sha256"],
        "bytes_received": received["bytes"],
        "seconds": received["seconds"],
    }
    bundle.write_json(a.staging / "bulk.json", doc)
    if problem:
        raise RunFailed(problem, transient=False)
    return {"throughput_bps": nbytes * 8 / max(received["seconds"], 1e-9)}


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


def host_facts(rig: Rig) -> tuple[dict[str, dict[str, Any]], bool]:
    """Kernel and tool versions per host (once per campaign); whether iperf3 has --mptcp."""
    b = Batch()
    for name in rig.hosts:
        b.add(name, Cmd(["sh", "-c", FACTS_SCRIPT], check=False))
    b.add("client", Cmd(["sh", "-c", WIFI_SCRIPT], check=False))
    facts: dict[str, dict[str, Any]] = {}
    flag = False
    for name, done in run_batch(rig.hosts, b).items():
        lines = done[0].stdout.splitlines()
        lines += [""] * (len(FACT_KEYS) + 1 - len(lines))
        tools = dict(zip(FACT_KEYS[1:], lines[1:5], strict=True))
        facts[name] = {"kernel": lines[0], "tools": tools}
        if name == "client":
            flag = lines[5].strip() not in ("", "0")
            if wifi := parse_wifi(done[1].stdout if len(done) > 1 else ""):
                facts[name]["wifi"] = wifi
    return facts, flag


def parse_wifi(text: str) -> dict[str, str]:
    """WIFI_SCRIPT's output: interface -> its `iw dev X link` text."""
    links: dict[str, str] = {}
    for block in text.split("@@wifi ")[1:]:
        name, _, body = block.partition("\n")
        links[name.strip()] = body.strip()
    return links


# (`<host>.tar`: what runners before the streamed fetch left on the host.)
SWEEP_SCRIPT = (
    'for f in "$1"/*/"$2"/*.pid; do [ -s "$f" ] && kill -s KILL -- "-$(cat "$f")" 2>/dev/null; '
    'done; rm -rf "$1"/*/"$2" "$1"/*/"$2".tar; rmdir "$1"/* "$1" 2>/dev/null; exit 0'
)


def sweep_rig(rig: Rig) -> None:
    """Remove what a killed runner left on the rig: its background processes (by their
    recorded pids), its remote files, and the impairments on every router."""
    b = Batch()
    root = commands.remote_root(rig.name)
    for host in rig.hosts:
        b.add(host, Cmd(["sh", "-c", SWEEP_SCRIPT, "mprig-sweep", root, host], check=False))
    for link in rig.paths:
        for clear in impair.clear_commands(link):
            b.add(clear[0], Cmd(clear[1], check=False))
    run_batch(rig.hosts, b)


def baseline_file(rig: Rig) -> Path:
    """Where a campaign keeps its rig's baseline until it has put it back (a campaign that
    was killed leaves it, and the next one on the rig restores from it)."""
    return Path(os.environ.get("MPRIG_STATE", "/run/mprig")) / f"{rig.name}.baseline.json"


def read_settings(rig: Rig, base: isolation.Baseline) -> isolation.Settings:
    """Every host's settings now, in one round trip."""
    b = Batch()
    for host in rig.hosts:
        b.add(host, Cmd(base.read_argv(host), check=False))
    done = run_batch(rig.hosts, b)
    return {h: isolation.parse(d[0].stdout if d else "") for h, d in done.items()}


def take_baseline(rig: Rig, variants: list[Any], reporter: Reporter) -> isolation.Baseline:
    """Read every knob the variants can set from the hosts: the campaign's baseline (or the
    one an unfinished campaign stored, which the live values may be polluted from)."""
    keys = isolation.campaign_keys(variants)
    empty = isolation.Baseline(keys, isolation.devices(rig.paths), {})
    hosts = read_settings(rig, empty)
    path = baseline_file(rig)
    with contextlib.suppress(OSError, ValueError):
        stored = json.loads(path.read_text())
        hosts = isolation.overlay(hosts, stored)
        reporter.message(f"restoring the baseline an unfinished campaign stored in {path}")
    base = dataclasses.replace(empty, hosts=hosts)
    path.parent.mkdir(parents=True, exist_ok=True)
    bundle.write_json(path, base.as_json())
    return base


def restore_baseline(rig: Rig, base: isolation.Baseline, reporter: Reporter) -> None:
    """Put the baseline back at the campaign's end, read it back, say what differs."""
    b = Batch()
    for host, argv in isolation.restore_all(base.hosts):
        b.add(host, Cmd(argv, check=False))
    run_batch(rig.hosts, b)
    if problems := isolation.diff(base.hosts, read_settings(rig, base)):
        reporter.message(f"the rig is not back at its baseline: {'; '.join(problems)}")
    baseline_file(rig).unlink(missing_ok=True)


def execute(ctx: Context, run: Run) -> dict[str, Any]:
    """Run one planned run with retries; returns its run.json record (bundle committed)."""
    check_space(ctx)
    started, attempts = time.time(), 0
    record: dict[str, Any] = {}
    while True:
        attempts += 1
        record = one_attempt(ctx, run, attempts)
        if record["status"] == "complete" or not record.pop("_transient", False):
            break
        if attempts > ctx.retries:
            record["reason"] += f" (gave up after {attempts} attempts)"
            break
        ctx.reporter.retry(run.run_id, attempts + 1, record["reason"])
    record["attempts"] = attempts
    record["timings"]["started"] = round(started, 3)
    record["timings"]["ended"] = round(time.time(), 3)
    record["timings"]["overhead_s"] = round(
        record["timings"]["ended"] - started - record["timings"]["traffic_s"], 3
    )
    with _signals_deferred():
        bundle.commit(ctx.results, run.run_id, record)
    return record


def one_attempt(ctx: Context, run: Run, number: int) -> dict[str, Any]:
    """One attempt; always tears down; returns a record (status complete/failed)."""
    staging = bundle.partial_dir(ctx.results, run.run_id)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    routers = tuple(dict.fromkeys(link.router for link in ctx.rig.paths))
    a = Attempt(ctx.rig, run, staging, routers=routers, baseline=ctx.baseline)
    cmds: commands.RunCommands | None = None
    out = Outcome()
    try:
        cmds = commands.build(
            run,
            ctx.rig.paths,
            server_addr=ctx.rig.server_addr,
            rig=ctx.rig.name,
            iperf3_mptcp_flag=ctx.iperf3_mptcp_flag,
            radio_paths=frozenset(ctx.rig.attenuators),
        )
        attempt_run(a, cmds, out)
        status, reason, transient = "complete", "", False
        cmds = None  # torn down by the stop stage already
    except (RunFailed, ToolMissing, HostError) as e:
        status, reason = "failed", str(e)
        transient = isinstance(e, ToolMissing) or bool(getattr(e, "transient", False))
    except Interrupted as e:
        with _signals_deferred(reraise=False):
            teardown(a, cmds)
            write_partial_record(ctx, run, a, out, f"interrupted by {e}")
        raise
    except BaseException:
        _teardown_quietly(a, cmds)
        raise
    if cmds is not None or a.background:
        _teardown_quietly(a, cmds)
    record = make_record(ctx, run, a, out, status, reason)
    record["_transient"] = transient
    return record


def _teardown_quietly(a: Attempt, cmds: commands.RunCommands | None) -> None:
    with _signals_deferred():
        teardown(a, cmds)


def check_space(ctx: Context) -> None:
    """Refuse to start a run with too little free space for its artifacts."""
    free = shutil.disk_usage(ctx.results).free
    if free < ctx.min_free_bytes:
        raise OutOfSpace(
            f"{ctx.results}: {free >> 20} MiB free, below {ctx.min_free_bytes >> 20} MiB; "
            "free space and rerun (completed runs are kept)"
        )


def write_partial_record(ctx: Context, run: Run, a: Attempt, out: Outcome, reason: str) -> None:
    """Commit an interrupted run's bundle (whatever was fetched) so `status` shows it."""
    record = make_record(ctx, run, a, out, "interrupted", reason)
    record["timings"].update(ended=round(time.time(), 3))
    with contextlib.suppress(OSError):
        bundle.commit(ctx.results, run.run_id, record)


def make_record(
    ctx: Context, run: Run, a: Attempt, out: Outcome, status: str, reason: str
) -> dict[str, Any]:
    """run.json for one run (artifacts and format are added by bundle.commit)."""
    hosts = {h: {**f, "sysctls": out.sysctls.get(h, {})} for h, f in ctx.facts.items()}
    cap = run.capture.model_dump(mode="json")
    record: dict[str, Any] = {
        "format": bundle.FORMAT,
        "campaign": ctx.campaign.name,
        "run_id": run.run_id,
        "index": run.index,
        "repetition": run.repetition,
        "seed": run.seed,
        "status": status,
        **({"reason": reason} if reason else {}),
        "attempts": 1,
        "point": run.point,
        "variant": run.variant.model_dump(mode="json"),
        "paths": [p.model_dump(mode="json") for p in run.paths],
        "links": [_link(link) for link in ctx.rig.paths],
        "server_addr": ctx.rig.server_addr,
        "traffic": run.traffic.model_dump(mode="json"),
        "capture": {**cap, "kernel_drops": out.drops, "ss_interval": out.ss_interval},
        "flags": run_flags(out),
        "rig_cpu": out.rig_cpu,
        **({"engine": out.engine} if out.engine else {}),
        **({"attenuation": out.attenuation} if out.attenuation else {}),
        "timings": {"traffic_s": round(out.traffic_s, 3), "stages": a.stage_s},
        "summary": out.summary,
        **({"cross_traffic": out.cross} if out.cross else {}),
        **({"timeline": out.timeline} if out.timeline else {}),
        **bottleneck_json(run.bottleneck),
        "hosts": hosts,
        "settings": out.settings,
        "mprig": {"version": __version__, "git": git_revision()},
        "commands": a.log,
        "rig_mode": ctx.rig.mode,
        "acceleration": vm.acceleration() if ctx.rig.mode.startswith("virtual") else "none (lab)",
    }
    return record


def run_flags(out: Outcome) -> list[str]:
    """capture_drops: tcpdump lost packets; ss_interval: the ss sampler's median interval
    was more than 20 % over its configured one (cwnd and RTT series are coarser);
    rig_limited: the rig's CPU (or the VM's host) was saturated during the traffic;
    not_realtime: an ns-3 engine lagged behind the wall clock past its limits."""
    flags = ["capture_drops"] if any(out.drops.values()) else []
    median, want = out.ss_interval.get("median_s"), out.ss_interval.get("configured_s")
    if median is not None and want and median > 1.2 * want:
        flags.append("ss_interval")
    if out.rig_cpu.get("rig_limited"):
        flags.append("rig_limited")
    if out.engine.get("realtime") is False:
        flags.append("not_realtime")
    return flags


def _link(link: Any) -> dict[str, str]:
    return {
        "name": link.name,
        "client_if": link.client_if,
        "client_addr": link.client_addr,
        "router": link.router,
    }


_GIT: list[str] = []


def git_revision() -> str:
    """The git revision of the mprig source tree ("unknown" outside a checkout)."""
    if not _GIT:
        src = Path(__file__).resolve().parent.parent
        try:
            p = subprocess.run(
                ["git", "-C", str(src), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
            _GIT.append(p.stdout.strip() or "unknown")
        except (OSError, subprocess.TimeoutExpired):
            _GIT.append("unknown")
    return _GIT[0]


# -- signals ----------------------------------------------------------------------------

_deferred: list[int] = []
_defer_depth = [0]


def _on_signal(signum: int, _frame: Any) -> None:
    if _defer_depth[0]:
        _deferred.append(signum)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def _signals_deferred(*, reraise: bool = True) -> Iterator[None]:
    """Teardown and commits must finish: a signal arriving meanwhile is raised afterwards
    (or dropped, when an interruption is already being handled)."""
    _defer_depth[0] += 1
    try:
        yield
    finally:
        _defer_depth[0] -= 1
    if not _defer_depth[0] and _deferred:
        signum = _deferred.pop(0)
        _deferred.clear()
        if reraise:
            raise Interrupted(signum)


@contextlib.contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """SIGINT/SIGTERM raise Interrupted in the main thread while the runner works."""
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """SIGINT/SIGTERM are noted, not acted on, while the body runs (rig teardown must
    finish); the caller sees them in the yielded list."""
    got: list[int] = []
    old = {
        s: signal.signal(s, lambda n, _f: got.append(n)) for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield got
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


# -- campaign level ---------------------------------------------------------------------


@dataclass(frozen=True)
class CampaignResult:
    """How a campaign went."""

    complete: int  # runs with a verified bundle at the end (skipped ones included)
    failed: int  # runs recorded failed in this invocation
    skipped: int  # runs already complete before this invocation
    interrupted: int | None  # signal number if interrupted


def run_campaign(
    campaign: Campaign,
    runs: list[Run],
    rig: Rig,
    results: Path,
    reporter: Reporter,
    *,
    force: bool = False,
    redo_rig_limited: bool = False,
) -> CampaignResult:
    """Run every planned run that has no verified bundle yet (all with force; with
    redo_rig_limited also the complete runs whose rig was saturated)."""
    decisions = {
        r.run_id: bundle.decide(results, r.run_id, force=force, redo_rig_limited=redo_rig_limited)
        for r in runs
    }
    todo = [r for r in runs if decisions[r.run_id].action == "run"]
    for name in bundle.clean_leftovers(results):
        reporter.message(f"removed {name} left by an earlier crash")
    sweep_rig(rig)
    facts, flag = host_facts(rig)
    base = take_baseline(rig, [r.variant for r in runs], reporter)
    ctx = Context(campaign, rig, results, reporter, facts, flag, base)
    reporter.campaign_start(
        campaign.name, len(runs), len(runs) - len(todo), rig=rig.name, mode=rig.mode
    )
    failed = 0
    with signals_as_exceptions():
        try:
            for run in todo:
                failed += run_one(ctx, run, decisions[run.run_id].reason)
        except Interrupted as e:
            reporter.campaign_end(status="interrupted", signal=e.signum)
            return CampaignResult(
                _count_complete(results, runs), failed, len(runs) - len(todo), e.signum
            )
        except OutOfSpace as e:
            reporter.campaign_end(status="stopped", reason=str(e))
            raise
        finally:
            with contextlib.suppress(HostError), _signals_deferred(reraise=False):
                sweep_rig(rig)
                restore_baseline(rig, base, reporter)
            rig.close()
    reporter.campaign_end(status="done", failed=failed)
    return CampaignResult(_count_complete(results, runs), failed, len(runs) - len(todo), None)


def run_one(ctx: Context, run: Run, reason: str) -> int:
    """Execute one run and report it; returns 1 if it failed."""
    ctx.reporter.run_start(run.run_id, run.index, reason)
    t0 = time.monotonic()
    try:
        record = execute(ctx, run)
    except Interrupted as e:
        done = bundle.verify(ctx.results / run.run_id).ok  # the signal came after the commit
        status, why = ("complete", "") if done else ("interrupted", f"interrupted by {e}")
        ctx.reporter.run_end(run.run_id, status, time.monotonic() - t0, why)
        raise
    except OutOfSpace as e:
        ctx.reporter.run_end(run.run_id, "failed", time.monotonic() - t0, str(e))
        raise
    status = record["status"]
    ctx.reporter.run_end(run.run_id, status, time.monotonic() - t0, record.get("reason", ""))
    return 0 if status == "complete" else 1


def _count_complete(results: Path, runs: list[Run]) -> int:
    return sum(bundle.verify(results / r.run_id).ok for r in runs)
