"""A run's stages on the rig, in order: set-up (remote dirs, captures, knobs, endpoints,
netem, snapshots, helpers, the traffic server) and the read-back of what it set, the
traffic, the stop (after snapshots, qdiscs removed) and the teardown that leaves the rig
clean whatever happened; plus the lab's attenuators and the rig's CPU headroom around
the traffic. Fetching and reading the artifacts is run_fetch.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mprig.campaign.plan import Run
from mprig.errors import HostError, UsageError
from mprig.rig import batch
from mprig.rig.batch import Batch, Cmd
from mprig.run import apps, aqm, capture, commands, headroom, impair, latency, traffic
from mprig.run.crossflow import cross_ready
from mprig.run.labwalk import walking
from mprig.run.run_attempt import (
    Attempt,
    Outcome,
    RunFailed,
    capture_interfaces,
    fused,
    wait_cmd,
)
from mprig.stack import isolation, knobs
from mprig.stack.userpm import ready_logs as mptcpd_ready

# Remove this host's files of earlier runs (their processes are stopped by then), then
# create the run's directory $3 = $1/<run id>/<host> (commands.remote_dir under
# commands.remote_root). Every host makes the shared levels at
# the same moment, so they are made one by one, "exists" being fine for them: bash's
# loadable `mkdir -p` (the session's) fails when a parent appears between its check and
# its own mkdir, and keeps failing in that shell.
CLEAN_SCRIPT = 'rm -rf "$1"/*/"$2" && { mkdir "$1" "${3%/*}" 2>/dev/null; mkdir "$3"; }'


PORTS = {"iperf3": traffic.IPERF3_PORT, "bulk": traffic.BULK_PORT, "blocks": traffic.BLOCKS_PORT}


PORTS |= apps.PORTS
SERVER_LOG = "traffic-server.log"  # the traffic server's output; its stem names its pid


def setup_stage(a: Attempt, cmds: commands.RunCommands) -> None:
    """One round trip per host: fresh remote dirs, the ss sampler on the sender, the
    kernel's TCP metrics flushed, and tcpdump started (each gets ready while the rest runs);
    knobs, endpoints, netem; tc, sysctl and nstat snapshots; the helpers and the traffic
    server; then the waits for the first sample, tcpdump capturing and the server
    listening."""
    b = Batch()
    waits = add_fresh(a, b)
    waits += add_captures(a, b)
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
    out.flushed = {
        h: isolation.flushed(a.output(h, isolation.FLUSH_ARGV)) for h in isolation.KNOB_HOSTS
    }
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


def add_fresh(a: Attempt, b: Batch) -> list[tuple[str, Cmd]]:
    """Each host's fresh run directory, the ss sampler on the sender and the kernel's TCP
    metrics flushed on client and server; the wait for the sampler's first sample."""
    root = commands.remote_root(a.rig.name)
    waits: list[tuple[str, Cmd]] = []
    for host in a.hosts():
        fresh = ["bash", "-c", CLEAN_SCRIPT, "mprig-dir", root, host, a.remote(host)]
        b.add(host, Cmd(fresh))
        if host == commands.sender(a.run):
            waits += add_sampler(a, b)
        if host in isolation.KNOB_HOSTS:  # what earlier runs' connections taught the kernel
            b.add(host, Cmd(isolation.FLUSH_ARGV))
    return waits


def add_sampler(a: Attempt, b: Batch) -> list[tuple[str, Cmd]]:
    """The ss sampler, started on the sender as soon as its run directory exists: its cold
    Python start (1.8 s of CPU under emulation) then overlaps the rest of the host's set-up
    instead of following it (it reads sockets, which no setting changes); the wait for its
    first sample (added by the caller after the rest of the stage: then the traffic, whose
    first seconds the samples missed when a busy guest took 1-3 s to start it)."""
    snd = commands.sender(a.run)
    b.add(snd, Cmd(capture.ss_sampler_argv(), log=f"{a.remote(snd)}/ss.txt"))
    return [(snd, wait_cmd('logged "$1" "$2"', f"{a.remote(snd)}/ss.txt", "# ", limit=60))]


def add_starts(a: Attempt, cmds: commands.RunCommands, b: Batch) -> list[tuple[str, Cmd]]:
    """The helpers and the traffic server start once the settings are in place (sockets
    take them when created); the waits for them to be ready and the server to listen."""
    waits: list[tuple[str, Cmd]] = []
    for host, argv, log in cmds.background:
        b.add(host, Cmd(argv, log=f"{a.remote(host)}/{log}"))
    for host, path in latency.ready_logs(a.run, a.remote):  # first echo sent, then traffic
        waits.append((host, wait_cmd('logged "$1" "$2"', path, '"seq"', limit=60)))
    for host, path, text in mptcpd_ready(a.run, a.remote):  # mptcpd hears MPTCP events
        waits.append((host, wait_cmd('logged "$1" "$2"', path, text)))
    for host, path in cross_ready(a.run, a.remote):  # receivers up before the traffic
        waits.append((host, wait_cmd('logged "$1" "bytes"', path)))
    for host, argv, log in cmds.timed:  # Python started before the traffic (timeline.py)
        b.add(host, Cmd(argv, log=f"{a.remote(host)}/{log}"))
        ready = wait_cmd('logged "$1" "ready"', f"{a.remote(host)}/{log}", limit=60)
        waits.append((host, ready))  # a cold Python under busy emulation took over 10 s
    if cmds.server is not None:
        host, argv = cmds.server
        b.add(host, Cmd(argv, log=f"{a.remote(host)}/{SERVER_LOG}"))
        port = PORTS[a.run.traffic.tool]
        waits.append((host, wait_cmd('listening "$1"', str(port))))
    return waits


def traffic_stage(a: Attempt, cmds: commands.RunCommands) -> float:
    """The traffic client, killed at its timeout; returns the traffic seconds."""
    host, argv = cmds.client
    limit = traffic.run_timeout_s(a.run.traffic, a.run.paths)
    b = Batch()
    for h, _, log in cmds.timed:  # the timeline's t = 0: the agents go with the client
        b.add(h, Cmd(["kill", "-USR1", str(a.background[h][Path(log).stem])]))
    b.add(host, Cmd(argv, timeout=limit, check=False, enforce_timeout=True))
    with walking(a.run, a.rig.attenuators, a.staging):  # a lab's walk: the attenuator
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
    """Stop the background commands (TERM: tcpdump writes its summary) but a traffic server
    that ends by itself: it gets cmds.server_wait_s to finish its exchange with the client
    (run.json `commands`: its `mprig-finish` exits 1 when it had to be signalled). Then the
    after snapshots, the qdiscs removed. Remote files go at the next run's setup or the
    campaign's end."""
    b = Batch()
    one_off = _one_off_server(a, cmds)
    for host, pids in a.background.items():  # TERMed as soon as the client is done
        if others := [p for p in pids.values() if one_off is None or one_off[:2] != (host, p)]:
            b.add(host, Cmd(batch.stop_argv(others), timeout=15))
    if one_off is not None:  # then the server has its time to end by itself
        host, pid, wait_s = one_off
        b.add(host, Cmd(batch.finish_argv([pid], wait_s), timeout=wait_s + 15, check=False))
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


def _one_off_server(a: Attempt, cmds: commands.RunCommands) -> tuple[str, int, float] | None:
    """(host, pid, seconds to wait) of a traffic server that ends by itself once its client
    is done; None for one that runs until stopped."""
    if cmds.server is None or cmds.server_wait_s is None:
        return None
    host = cmds.server[0]
    pid = a.background.get(host, {}).get(Path(SERVER_LOG).stem)
    return None if pid is None else (host, pid, cmds.server_wait_s)


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


def set_attenuation(run: Run, radios: dict[str, Any]) -> dict[str, Any]:
    """Set each attenuated Wi-Fi path to its `distance_m` (the channel model's PL(d) -
    PL(physical_m); 0 dB without a distance), read it back, and return run.json
    `attenuation`; RunFailed when the attenuator reads back another value."""
    out: dict[str, Any] = {}
    if not radios:  # the attenuator's module (urllib, ssl) costs a second under VM emulation
        return out
    from mprig.rig.attenuator import attenuation_for_distance

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
