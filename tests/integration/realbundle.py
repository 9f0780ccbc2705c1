"""Make a real run bundle (docs/bundle.md) on this kernel, without the runner.

Two paths between a client and a server through two routers, rate-limited with tbf on the
routers' client-facing interfaces (no netem: the native kernel lacks it), one short MPTCP
iperf3 download under mptcpize, tcpdump on client and server, ss sampled on the sender every
100 ms, nstat before and after. Needs root. Used by the collect integration test and, run as
a script, to regenerate the committed fixture bundle:

    sudo .venv/bin/python tests/integration/realbundle.py tests/captures/test_collect/two_path
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SERVER_ADDR = "10.55.9.1"


@dataclass(frozen=True)
class PathDef:
    """One path of the test rig."""

    name: str  # spec path name
    kind: str  # wifi | cellular
    router: str  # router host name
    client_if: str  # client interface
    subnet: int  # third octet of the client-side /24
    down_mbit: float  # rate towards the client (tbf, or netem when delay/loss are set)
    delay_ms: float = 0.0  # netem delay towards the client (needs sch_netem: VM mode)
    loss_pct: float = 0.0  # netem random loss towards the client


PATHS = (
    PathDef("wifi", "wifi", "ap", "eth1", 1, 4.0),
    PathDef("cell", "cellular", "cell", "eth2", 2, 2.0),
)


def sh(
    argv: Sequence[str], *, check: bool = True, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, timeout=timeout)


class Rig:
    """The namespaces of one test rig, named <prefix>-<host>."""

    def __init__(self, prefix: str, paths: Sequence[PathDef] = PATHS) -> None:
        self.prefix, self.paths = prefix, tuple(paths)
        self.commands: list[dict[str, object]] = []
        self.pending: list[tuple[str | None, list[str]]] = []

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def run(self, host: str, argv: Sequence[str], *, check: bool = True) -> str:
        t0 = time.monotonic()
        res = sh(["ip", "netns", "exec", self.ns(host), *argv], check=False)
        self.commands.append(
            {
                "host": host,
                "argv": list(argv),
                "returncode": res.returncode,
                "seconds": round(time.monotonic() - t0, 3),
            }
        )
        if check and res.returncode != 0:
            raise RuntimeError(f"{host}: {' '.join(argv)}: {res.stderr.strip()}")
        return res.stdout

    def setup(self, host: str | None, argv: Sequence[str]) -> None:
        """Queue a set-up command (host None: the root namespace) for flush()."""
        self.pending.append((host, list(argv)))

    def flush(self) -> None:
        """Run the queued commands as one shell script: one process start instead of one
        per command, which matters under the VM's software emulation."""
        full = [
            a if h is None else ["ip", "netns", "exec", self.ns(h), *a] for h, a in self.pending
        ]
        t0 = time.monotonic()
        res = subprocess.run(["sh", "-ec", "\n".join(shlex.join(a) for a in full)],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        each = round((time.monotonic() - t0) / max(len(full), 1), 3)
        for h, a in self.pending:
            self.commands.append({"host": h or "root", "argv": a, "returncode": res.returncode,
                                  "seconds": each})  # fmt: skip
        self.pending.clear()
        if res.returncode != 0:
            raise RuntimeError(f"rig set-up failed: {res.stderr.strip()}")

    def hosts(self) -> list[str]:
        return ["client", "server", *(p.router for p in self.paths)]

    def popen(self, host: str, argv: Sequence[str], out: Path) -> subprocess.Popen[bytes]:
        with out.open("wb") as fh:
            return subprocess.Popen(
                ["ip", "netns", "exec", self.ns(host), *argv],
                stdout=fh,
                stderr=subprocess.DEVNULL,
            )

    def wait_listening(self, host: str, port: int, limit: float = 60.0) -> None:
        """Until a socket of `host` listens on `port` (nslink.wait_listening: the runner's own
        wait loop): a fixed sleep after starting a server is too short on a loaded guest."""
        from nslink import wait_listening

        wait_listening(self.ns(host), port, limit=limit)

    def veth(self, a: str, a_if: str, b: str, b_if: str) -> None:
        link = ["ip", "link", "add", a_if, "netns", self.ns(a), "type", "veth"]
        self.setup(None, [*link, "peer", "name", b_if, "netns", self.ns(b)])

    def addr(self, host: str, dev: str, cidr: str) -> None:
        self.setup(host, ["ip", "addr", "add", cidr, "dev", dev])
        self.setup(host, ["ip", "link", "set", dev, "up"])
        self.setup(host, ["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"])

    def up(self) -> None:
        for h in self.hosts():
            self.setup(None, ["ip", "netns", "add", self.ns(h)])
            self.setup(h, ["ip", "link", "set", "lo", "up"])
        self.setup("server", ["ip", "addr", "add", f"{SERVER_ADDR}/32", "dev", "lo"])
        for i, p in enumerate(self.paths, start=1):
            self.path_up(i, p)
        for h in ("client", "server"):
            self.setup(
                h, ["ip", "mptcp", "limits", "set", "subflows", "4", "add_addr_accepted", "4"]
            )
        first = self.paths[0]
        self.setup("client", ["ip", "route", "add", "default", "via", f"10.55.{first.subnet}.2"])
        self.flush()

    def path_up(self, i: int, p: PathDef) -> None:
        c_addr, r_addr = f"10.55.{p.subnet}.1", f"10.55.{p.subnet}.2"
        s_addr, rs_addr = f"10.55.{10 + p.subnet}.1", f"10.55.{10 + p.subnet}.2"
        self.veth("client", p.client_if, p.router, "c0")
        self.veth("server", f"eth{i}", p.router, "s0")
        self.addr("client", p.client_if, f"{c_addr}/24")
        self.addr(p.router, "c0", f"{r_addr}/24")
        self.addr("server", f"eth{i}", f"{s_addr}/24")
        self.addr(p.router, "s0", f"{rs_addr}/24")
        self.setup(p.router, ["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        self.setup(p.router, ["ip", "route", "add", f"{SERVER_ADDR}/32", "via", s_addr])
        self.setup("server", ["ip", "route", "add", f"10.55.{p.subnet}.0/24", "via", rs_addr])
        table = str(100 + p.subnet)
        self.setup("client", ["ip", "rule", "add", "from", c_addr, "table", table])
        self.setup("client", ["ip", "route", "add", "default", "via", r_addr, "table", table])
        if i > 1:
            endpoint = ["ip", "mptcp", "endpoint", "add", c_addr]
            self.setup("client", [*endpoint, "dev", p.client_if, "subflow"])
        self.setup(p.router, ["tc", "qdisc", "add", "dev", "c0", "root", *qdisc(p)])

    def down(self) -> None:
        for h in self.hosts():
            sh(["ip", "netns", "del", self.ns(h)], check=False)


def qdisc(p: PathDef) -> list[str]:
    """tbf for a plain rate limit; netem for delay and loss (with its own rate)."""
    rate = f"{p.down_mbit}mbit"
    if p.delay_ms or p.loss_pct:
        return ["netem", "delay", f"{p.delay_ms}ms", "loss", f"{p.loss_pct}%", "rate", rate]
    return ["tbf", "rate", rate, "burst", "4kb", "latency", "40ms"]


@contextmanager
def rig(prefix: str, paths: Sequence[PathDef] = PATHS) -> Iterator[Rig]:
    r = Rig(prefix, paths)
    try:
        r.up()
        yield r
    finally:
        r.down()


class SsSampler(threading.Thread):
    """`ss -tinHM` every 100 ms, each sample headed by `# <unix time>`."""

    def __init__(self, r: Rig, host: str, out: Path) -> None:
        super().__init__(daemon=True)
        self.r, self.host, self.out = r, host, out
        self.stop_event = threading.Event()

    def run(self) -> None:
        with self.out.open("w") as fh:
            while not self.stop_event.is_set():
                fh.write(f"# {time.time():.6f}\n")
                fh.write(sh(["ip", "netns", "exec", self.r.ns(self.host), "ss", "-tinHM"]).stdout)
                self.stop_event.wait(0.1)


def snapshot(r: Rig, bundle: Path, when: str) -> None:
    env_hist = f"NSTAT_HISTORY=/tmp/{r.prefix}-nstat-{when}"
    for h in ("client", "server"):
        text = r.run(h, ["env", env_hist, "nstat", "-az"])
        (bundle / f"nstat-{h}-{when}.txt").write_text(text)
    for p in r.paths:
        (bundle / f"tc-{p.router}-{when}.txt").write_text(
            r.run(p.router, ["tc", "-s", "qdisc", "show"])
        )


def start_capture(r: Rig, host: str, bundle: Path, snaplen: int) -> subprocess.Popen[bytes]:
    # --immediate-mode: without it packets still in the capture ring (up to the 1 s block
    # timeout of TPACKET_V3) are lost when tcpdump is stopped right after the traffic.
    argv = ["tcpdump", "-i", "any", "-s", str(snaplen), "--immediate-mode", "-U", "-Z", "root"]
    argv += ["-w", str(bundle / f"{host}.pcap")]
    proc = subprocess.Popen(
        ["ip", "netns", "exec", r.ns(host), *argv, "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    proc.stderr.readline()  # "tcpdump: listening on any ...": the capture is live
    return proc


def stop_capture(proc: subprocess.Popen[bytes]) -> int:
    """Stop tcpdump; return its 'dropped by kernel' count."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    for line in err.decode().splitlines():
        if "dropped by kernel" in line:
            return int(line.split()[0])
    return 0


def traffic(r: Rig, bundle: Path, duration: float) -> None:
    from mprig.run.traffic import IPERF3_PORT

    srv = r.popen(
        "server", ["mptcpize", "run", "iperf3", "-s", "-1", "-J"], bundle / "iperf3-server.json"
    )
    r.wait_listening("server", IPERF3_PORT)
    argv = ["mptcpize", "run", "iperf3", "-c", SERVER_ADDR, "-R", "-J", "-t", str(duration)]
    (bundle / "iperf3-client.json").write_text(r.run("client", argv, check=False))
    srv.wait(timeout=duration + 15)


# The cross-check's receiver: a receive buffer larger than the transfer, and no read until
# the sender's DATA_FIN (poll for POLLRDHUP, which takes no socket lock). A reading
# application holds the subflows' socket locks in recvmsg; packets arriving meanwhile wait
# in the socket backlog and reach MPTCP later than, and in another order than, the capture
# records them, which the capture cannot see. Never reading during the transfer makes the
# kernel process every packet in capture order, so the two counts measure the same thing.
HOLD_RECEIVER = r"""
import hashlib, json, select, socket, sys, time
addr, port, nbytes, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * nbytes)
s.settimeout(10); s.connect((addr, port)); s.settimeout(None)
t0, p = time.monotonic(), select.poll()
p.register(s, select.POLLRDHUP)
while not p.poll(60_000):
    pass
h, done = hashlib.sha256(), 0
while chunk := s.recv(1 << 20):
    h.update(chunk); done += len(chunk)
s.close()
with open(out, "w") as f:
    json.dump({"bytes": done, "sha256": h.hexdigest(), "seconds": time.monotonic() - t0}, f)
"""


@contextmanager
def rmem_max(limit: int) -> Iterator[None]:
    """Raise net.core.rmem_max (the SO_RCVBUF cap; init namespace only) to `limit` for the
    duration, if `limit` is above it; restored afterwards."""
    knob = Path("/proc/sys/net/core/rmem_max")
    before = int(knob.read_text())
    if limit > before:
        knob.write_text(str(limit))
    try:
        yield
    finally:
        if limit > before:
            knob.write_text(str(before))


def traffic_bulk(r: Rig, bundle: Path, nbytes: int, *, hold: bool = False) -> None:
    """The runner's bulk transfer (mprig.run.traffic): the client reads every byte before it
    closes, so no data arrives after the receiver's close. `hold`: the cross-check's
    receiver (HOLD_RECEIVER) instead of the runner's."""
    from mprig.run.traffic import BULK_PORT, bulk_argv

    tmp = Path(f"/tmp/{r.prefix}-bulk")
    tmp.mkdir(exist_ok=True)
    send = bulk_argv("listen", "0.0.0.0", nbytes, 1, mptcp=True, send=True, out=f"{tmp}/s.json")
    srv = r.popen("server", send, tmp / "server.log")
    r.wait_listening("server", BULK_PORT)
    recv = bulk_argv("connect", SERVER_ADDR, nbytes, 1, mptcp=True, send=False,
                     out=f"{tmp}/r.json")  # fmt: skip
    if hold:
        recv = ["python3", "-c", HOLD_RECEIVER, SERVER_ADDR, str(BULK_PORT), str(nbytes)]
        recv.append(f"{tmp}/r.json")
    with rmem_max(16 * nbytes if hold else 0):
        r.run("client", recv)
    srv.wait(timeout=30)
    sent, got = (json.loads((tmp / n).read_text()) for n in ("s.json", "r.json"))
    doc = {"bytes": sent["bytes"], "sha256_sent": sent["sha256"], "sha256_received":
           got["sha256"], "bytes_received": got["bytes"], "seconds": got["seconds"]}  # fmt: skip
    (bundle / "bulk.json").write_text(json.dumps(doc) + "\n")


def run_traffic(
    r: Rig,
    bundle: Path,
    duration: float,
    snaplen: int,
    hosts: Sequence[str],
    bulk: int | None,
    hold: bool = False,
) -> dict[str, int]:
    snapshot(r, bundle, "before")
    caps = {h: start_capture(r, h, bundle, snaplen) for h in hosts}
    sampler = SsSampler(r, "server", bundle / "ss-server.txt")
    sampler.start()
    try:
        if bulk:
            traffic_bulk(r, bundle, bulk, hold=hold)
        else:
            traffic(r, bundle, duration)
    finally:
        sampler.stop_event.set()
        sampler.join()
        time.sleep(0.2)  # the last ACKs and FINs
        drops = {h: stop_capture(p) for h, p in caps.items()}
    snapshot(r, bundle, "after")
    return drops


def path_dump(p: PathDef) -> dict[str, object]:
    def direction(rate: float, delay: float, loss: float) -> dict[str, object]:
        return {
            "rate_mbit": rate,
            "delay_ms": delay,
            "jitter_ms": 0.0,
            "loss_pct": loss,
            "limit_pkts": 1000,
        }

    return {
        "name": p.name,
        "kind": p.kind,
        "down": direction(p.down_mbit, p.delay_ms, p.loss_pct),
        "up": direction(1000.0, 0.0, 0.0),
        "distance_m": None,
        "wifi_standard": None,
    }


def run_json(r: Rig, bundle: Path, meta: dict[str, object]) -> dict[str, object]:
    artifacts = {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(bundle.iterdir())
        if f.name != "run.json"
    }
    links = [
        {
            "name": p.name,
            "kind": p.kind,
            "client_if": p.client_if,
            "client_addr": f"10.55.{p.subnet}.1",
            "router": p.router,
            "router_client_if": "c0",
            "router_server_if": "s0",
        }
        for p in r.paths
    ]
    return {
        "format": 1,
        "run_id": bundle.name,
        "index": 0,
        "repetition": 1,
        "seed": 1,
        "status": "complete",
        "attempts": 1,
        "point": {},
        "variant": {"name": "mptcp", "protocol": "mptcp", "cc": meta["cc"]},
        "paths": [path_dump(p) for p in r.paths],
        "links": links,
        "server_addr": SERVER_ADDR,
        "traffic": {
            "tool": "bulk" if meta["bulk"] else "iperf3",
            "direction": "download",
            "duration_s": meta["duration"],
            "omit_s": 0,
            "bytes": meta["bulk"],
        },
        "capture": {
            "snaplen": meta["snaplen"],
            "hosts": meta["hosts"],
            "kernel_drops": meta["drops"],
        },
        "flags": [],
        "timings": {
            "started": meta["started"],
            "ended": meta["ended"],
            "traffic_s": meta["duration"],
            "overhead_s": 0.0,
        },
        "hosts": {"client": {"kernel": os.uname().release, "sysctls": {}, "tools": {}}},
        "mprig": {"version": "0.1.0", "git": "tests/integration/realbundle.py"},
        "commands": r.commands,
        "artifacts": artifacts,
        "rig_mode": "virtual-native",
        "campaign": meta["campaign"],
    }


def make_bundle(
    bundle: Path,
    *,
    prefix: str,
    duration: float = 1.0,
    snaplen: int = 200,
    campaign: str = "h5",
    paths: Sequence[PathDef] = PATHS,
    hosts: Sequence[str] = ("client", "server"),
    bulk: int | None = None,
    hold: bool = False,
) -> Path:
    """Run one real MPTCP download (iperf3 for `duration`, or a `bulk` transfer of that
    many bytes; `hold`: with the cross-check's receiver) and write its bundle into `bundle`
    (created)."""
    bundle.mkdir(parents=True)
    with rig(prefix, paths) as r:
        cc = r.run("server", ["sysctl", "-n", "net.ipv4.tcp_congestion_control"]).strip()
        started = time.time()
        drops = run_traffic(r, bundle, duration, snaplen, hosts, bulk, hold)
        meta: dict[str, object] = {
            "cc": cc,
            "duration": duration,
            "snaplen": snaplen,
            "drops": drops,
            "started": started,
            "ended": time.time(),
            "campaign": campaign,
            "hosts": list(hosts),
            "bulk": bulk,
        }
        doc = run_json(r, bundle, meta)
    (bundle / "run.json").write_text(json.dumps(doc, indent=2) + "\n")
    return bundle


# The committed fixture: slower paths and the receiver's capture only, to stay small.
FIXTURE_PATHS = (
    PathDef("wifi", "wifi", "ap", "eth1", 1, 2.0),
    PathDef("cell", "cellular", "cell", "eth2", 2, 1.0),
)

# The kernel cross-check (VM mode): unequal delays and some loss make data arrive out of
# order at the connection level.
CROSSCHECK_PATHS = (
    PathDef("wifi", "wifi", "ap", "eth1", 1, 4.0, delay_ms=10.0, loss_pct=0.5),
    PathDef("cell", "cellular", "cell", "eth2", 2, 2.0, delay_ms=40.0, loss_pct=0.5),
)

if __name__ == "__main__":
    prefix = f"h5g{os.getpid() % 1000}"
    if len(sys.argv) == 4 and sys.argv[2] == "--crosscheck":  # a bulk transfer of N bytes
        make_bundle(Path(sys.argv[1]), prefix=prefix, paths=CROSSCHECK_PATHS,
                    bulk=int(sys.argv[3]), hosts=("client",), hold=True)  # fmt: skip
    else:
        make_bundle(Path(sys.argv[1]), prefix=prefix, paths=FIXTURE_PATHS, hosts=("client",))
