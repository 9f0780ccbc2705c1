"""Cross traffic: the competing flows of `paths[].cross_traffic`, run beside a run's own
traffic by a small program on the client and the server.

Each flow crosses its path's bottleneck (the client binds the path's address, so policy
routing takes that path both ways) on a port of its own. Its receiver logs the bytes it
has received every 0.1 s with the wall-clock time, so the runner and the collectors
measure each flow over the run's own traffic window (mprig/run/fairness.py); its sender logs
the congestion control the kernel actually gave its socket (read back with getsockopt)
and the bytes it sent. A TCP flow is plain TCP, never MPTCP, whatever the variant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mprig.campaign.crossspec import CrossFlow
from mprig.campaign.plan import Run
from mprig.errors import HostError
from mprig.rig.host import PathLink
from mprig.run import apps, bottleneck, fairness, traffic

PORT_BASE = 5210  # flow k (0-based over every path's flows, spec order) uses PORT_BASE + k
UDP_PAYLOAD = 1400  # bytes per datagram: with UDP/IP headers one 1500-byte frame
TICK_S = 0.1  # the receiver's logging interval

# `python3 -c FLOW_SCRIPT MODE PROTO SIDE LOCAL REMOTE PORT CC RATE_BPS START STOP ON OFF
# MAIN_PORT OUT`. MODE send|recv; SIDE listen|connect (tcp); LOCAL the address bound (""
# any); STOP -1 runs until killed; ON 0 sends without pauses. The sender's clock starts when
# its host has an established connection on MAIN_PORT, the run's own traffic (0: at once),
# so a flow's start_s counts from the run's traffic and no flow gets a head start. The
# receiver writes {t, bytes} lines (wall clock, cumulative bytes), the sender {event: start,
# cc}, {event: go, t}, {t, sent} and {event: error, t, message}.
FLOW_SCRIPT = r"""
import json, socket, sys, time
mode, proto, side, local, remote, port, cc, rate, start, stop, on, off, main, out = sys.argv[1:15]
port, rate, start, stop = int(port), float(rate), float(start), float(stop)
on, off = float(on), float(off)
f = open(out, "w", buffering=1)
def log(**kw): f.write(json.dumps(kw) + "\n")
def active(t):
    if t < start or (stop >= 0 and t >= stop): return False
    return on == 0 or (t - start) % (on + off) < on
def tcp_socket():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    if side == "listen":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((local, port)); s.listen(1)
        return s.accept()[0]
    end = time.monotonic() + 15
    while True:
        s.bind((local, 0))
        try:
            s.connect((remote, port)); return s
        except OSError:
            if time.monotonic() > end: raise
            s.close(); time.sleep(0.1); s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
def receive(s, udp):
    total, tick = 0, time.monotonic()
    s.settimeout(0.02)
    while True:
        try:
            n = len(s.recv(65536))
            if n == 0 and not udp: break
            total += n
        except socket.timeout:
            pass
        if time.monotonic() >= tick:
            log(t=time.time(), bytes=total); tick = time.monotonic() + TICK
    log(t=time.time(), bytes=total)
def main_started():
    want = ":%04X" % int(main)
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = [r.split() for r in open(name).read().splitlines()[1:]]
        except OSError:
            continue
        if any(r[3] == "01" and want in (r[1][-5:], r[2][-5:]) for r in rows): return True
    return False
def send(s, udp):
    sent, mark, chunk = 0, 0.0, bytes(PAYLOAD if udp else 65536)
    while int(main) and not main_started(): time.sleep(0.01)
    t0 = time.monotonic(); log(event="go", t=time.time())
    s.settimeout(0.05); phase, base = None, 0.0
    while stop < 0 or time.monotonic() - t0 < stop:
        now = time.monotonic(); t = now - t0
        if now >= mark:
            log(t=time.time(), sent=sent); mark = now + 0.5
        if not active(t):
            phase = None; time.sleep(0.005); continue
        if phase is None:
            phase, base, done = t, now, 0
        if not udp:
            try: sent += s.send(chunk)
            except socket.timeout: pass
            continue
        due = int(rate / 8 * (now - base) / len(chunk)) - done
        for _ in range(min(due, 1000)):
            try: s.sendto(chunk, (remote, port)); sent += len(chunk)
            except OSError: pass
            done += 1
        time.sleep(0.002)
    log(t=time.time(), sent=sent)
TICK, PAYLOAD = @TICK@, @PAYLOAD@
try:
    if proto == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((local, port if mode == "recv" else 0))
        if mode == "send": log(event="start", cc="")
        receive(s, True) if mode == "recv" else send(s, True)
    else:
        s = tcp_socket()
        if mode == "send":
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
            got = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
            log(event="start", cc=got.split(b"\0")[0].decode())
            send(s, False)
        else:
            receive(s, False)
except Exception as e:
    log(event="error", t=time.time(), message=f"{type(e).__name__}: {e}"); sys.exit(1)
""".replace("@TICK@", str(TICK_S)).replace("@PAYLOAD@", str(UDP_PAYLOAD))


@dataclass(frozen=True)
class FlowRef:
    """One competing flow of a run, where it runs and what it writes."""

    path: str  # the path it crosses
    n: int  # 1-based position in the path's cross_traffic list
    flow: CrossFlow
    port: int
    sender: str  # host that sends: server (download) or client (upload)

    @property
    def label(self) -> str:
        """`<path>.<n>`: the flow's name in run.json and the runs.parquet columns."""
        return f"{self.path}.{self.n}"

    @property
    def receiver(self) -> str:
        return "client" if self.sender == "server" else "server"

    def log(self, role: str) -> str:
        """The file one end writes in its host's run directory (and the bundle)."""
        return f"cross-{self.path}-{self.n}.jsonl" if role == "recv" else self.sender_log

    @property
    def sender_log(self) -> str:
        return f"cross-{self.path}-{self.n}-sender.jsonl"


def flows(run: Run) -> list[FlowRef]:
    """Every competing flow of a run, ports in spec order."""
    return flow_refs([(p.name, p.cross_traffic) for p in run.paths], run.traffic.direction)


def flow_refs(paths: Sequence[tuple[str, Sequence[CrossFlow]]], direction: str) -> list[FlowRef]:
    """Every competing flow of these (path name, flows), in order; `direction` is the run's
    traffic direction (a flow's own overrides it)."""
    out: list[FlowRef] = []
    for name, path_flows in paths:
        for n, flow in enumerate(path_flows, start=1):
            way = flow.direction or direction
            sender = "server" if way == "download" else "client"
            out.append(FlowRef(name, n, flow, PORT_BASE + len(out), sender))
    return out


def background(
    run: Run, links: tuple[PathLink, ...], server_addr: str, remote_dir: Callable[[str], str]
) -> list[tuple[str, list[str], str]]:
    """(host, argv, stdout log name) of both ends of every flow, and the shared
    bottleneck's counters (bottleneck.watch_argv); `remote_dir(host)` is the host's run
    directory."""
    by_name = {link.name: link for link in links}
    out: list[tuple[str, list[str], str]] = []
    if run.bottleneck is not None:
        out.append(("server", bottleneck.watch_argv(), bottleneck.WATCH_LOG))
    for ref in flows(run):
        client = by_name[ref.path].client_addr
        for host, role in ((ref.sender, "send"), (ref.receiver, "recv")):
            argv = flow_argv(ref, role, host, client, server_addr, main_port(run))
            argv.append(f"{remote_dir(host)}/{ref.log(role)}")
            out.append((host, argv, f"cross-{ref.path}-{ref.n}-{role}.log"))
    return out


def main_port(run: Run) -> int:
    """The port of the run's own traffic, which the senders wait for (0: a tool whose port
    is not known here; they start at once)."""
    ports = {"iperf3": traffic.IPERF3_PORT, "bulk": traffic.BULK_PORT, **apps.PORTS}
    return {**ports, "blocks": traffic.BLOCKS_PORT}.get(run.traffic.tool, 0)


def flow_argv(
    ref: FlowRef, role: str, host: str, client: str, server: str, main_port: int = 0
) -> list[str]:
    """One end of one flow, without its output file. TCP: the server listens, the client
    connects from the path's address. UDP: the receiver binds its address (the client's
    on this path), the sender sends there (from the path's address on the client)."""
    f = ref.flow
    udp = f.kind == "udp"
    local = client if host == "client" else ("" if udp and role == "send" else server)
    remote = server if host == "client" else client
    side = "-" if udp else ("listen" if host == "server" else "connect")
    timing = [f.start_s, -1 if f.stop_s is None else f.stop_s, f.on_s or 0, f.off_s or 0]
    argv = ["python3", "-c", FLOW_SCRIPT, role, f.kind, side, local, remote, str(ref.port)]
    argv += [f.congestion or "-", f"{(f.rate_mbit or 0) * 1e6:g}"]
    return [*argv, *(f"{v:g}" for v in timing), str(main_port)]


def cross_files(run: Run) -> dict[str, list[str]]:
    """Per host, the flow logs and the shared bottleneck's counters that become artifacts
    (the runner's fetch list)."""
    files: dict[str, list[str]] = {"server": [bottleneck.WATCH_LOG]} if run.bottleneck else {}
    for ref in flows(run):
        files.setdefault(ref.receiver, []).append(ref.log("recv"))
        files.setdefault(ref.sender, []).append(ref.sender_log)
    return files


def read_logs(bundle: Path, run_flows: list[FlowRef]) -> dict[str, fairness.FlowLog]:
    """Each flow's two logs from a bundle (or staging) directory; OSError, ValueError."""
    logs = {}
    for ref in run_flows:
        samples, recv_error = fairness.parse_receiver((bundle / ref.log("recv")).read_text())
        cc, sent, send_error = fairness.parse_sender((bundle / ref.sender_log).read_text())
        error = min(filter(None, (send_error, recv_error)), default=None)
        logs[ref.label] = fairness.FlowLog(samples, cc, sent, *(error or (None, None)))
    return logs


def cross_record(
    staging: Path, run: Run, window: tuple[float, float], summary: dict[str, Any]
) -> dict[str, Any]:
    """run.json `cross_traffic` ({} without competing flows); HostError (not retried) when
    a flow's program failed or its sender's socket did not get the congestion control
    asked for."""
    refs = flows(run)
    if not refs:
        return {}
    try:
        logs = read_logs(staging, refs)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HostError("cross traffic", f"unreadable flow log: {e}", transient=True) from None
    for ref in refs:
        log = logs[ref.label]
        if log.error and (log.error_t or 0.0) <= window[1]:  # not killed after the run
            raise HostError(ref.sender, f"cross flow {ref.label}: {log.error}")
        if log.cc != ref.flow.congestion:
            got = f"got {log.cc!r}" if log.cc is not None else "never started"
            raise HostError(
                ref.sender, f"cross flow {ref.label}: cc {ref.flow.congestion!r}, {got}"
            )
    main = float(summary.get("throughput_bps") or 0.0)
    v, names = run.variant, [p.name for p in run.paths]
    used = used_paths(v.protocol, v.path, v.paths, names)
    shared = run.bottleneck.paths if run.bottleneck else ()
    return fairness.summary(
        main, logs, window, competing(refs, used, shared, run.traffic.direction)
    )


def used_paths(
    protocol: str, path: str | None, paths: Sequence[str] | None, every: Sequence[str]
) -> list[str]:
    """The paths a run's connection crosses: a tcp variant's path, an mptcp variant's
    paths (all by default)."""
    if protocol == "tcp":
        return [path] if path else []
    return list(paths) if paths is not None else list(every)


def competing(
    refs: Sequence[FlowRef], used: Sequence[str], shared: Sequence[str], direction: str
) -> list[str]:
    """The flows that compete with the run's connection for a queue: those in its direction
    on a path it crosses, or on any path of a shared bottleneck it crosses."""
    reach = set(used) | (set(shared) if set(used) & set(shared) else set())
    sender = "server" if direction == "download" else "client"
    return [r.label for r in refs if r.path in reach and r.sender == sender]


SOURCE_NAME = "<mprig/run/crossflow.py FLOW_SCRIPT>"


def shown(argv: list[str]) -> list[str]:
    """A flow's argv for people (`plan --commands`, run.json): its program as a name."""
    return [SOURCE_NAME if a == FLOW_SCRIPT else a for a in argv]


def cross_ready(run: Run, remote_dir: Callable[[str], str]) -> list[tuple[str, str]]:
    """(host, file) of every receiver's log: its first line says the flow's sockets are up
    (the runner waits for them, so the competing flows run before the run's traffic)."""
    return [(ref.receiver, f"{remote_dir(ref.receiver)}/{ref.log('recv')}") for ref in flows(run)]
