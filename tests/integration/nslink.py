"""Shell helpers for native tests that build their own namespaces: run a command, run it
in a namespace, and join two namespaces by a veth pair ready for captures (addresses up,
TSO/GSO/GRO off), and wait until a server listens."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Iterator, Sequence


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def ns(name: str, *argv: str) -> str:
    return sh("ip", "netns", "exec", name, *argv)


@contextlib.contextmanager
def scratch_ns(prefix: str) -> Iterator[str]:
    """A fresh, empty network namespace named `prefix`-<random>; deleted when the block
    ends."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    sh("ip", "netns", "add", name)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def veth_pair(a: tuple[str, str, str], b: tuple[str, str, str]) -> None:
    """A veth pair between two namespaces; each side (namespace, device, address/24) is
    addressed, up, and without offloads (no 64 KB super-segments in ss or captures)."""
    sh("ip", "link", "add", a[1], "netns", a[0], "type", "veth", "peer", b[1], "netns", b[0])
    for host, dev, addr in (a, b):
        sh("ip", "-n", host, "addr", "add", f"{addr}/24", "dev", dev)
        sh("ip", "-n", host, "link", "set", dev, "up")
        ns(host, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")


@contextlib.contextmanager
def mptcp_hosts(*names: str, subflows: int = 8, sysctls: Sequence[str] = ()) -> Iterator[None]:
    """Namespaces with loopback up, MPTCP limits `subflows` (and add_addr_accepted) and
    `sysctls` (key=value) set; deleted, with all they hold, when the block ends."""
    try:
        for host in names:
            sh("ip", "netns", "add", host)
            sh("ip", "-n", host, "link", "set", "lo", "up")
            limit = str(subflows)
            ns(host, "ip", "mptcp", "limits", "set", "subflows", limit, "add_addr_accepted", limit)
            if sysctls:
                ns(host, "sysctl", "-q", "-w", *sysctls)
        yield
    finally:
        for host in names:
            subprocess.run(["ip", "netns", "del", host], capture_output=True, check=False)


def policy_route(host: str, i: int, dev: str, addr: str, net: str, endpoint: bool = True) -> None:
    """Traffic from `addr` leaves by `dev` (table 100+i towards `net`); with `endpoint`, an
    MPTCP subflow endpoint with id `i` on it."""
    sh("ip", "-n", host, "rule", "add", "from", addr, "table", str(100 + i))
    sh("ip", "-n", host, "route", "add", net, "dev", dev, "table", str(100 + i))
    if endpoint:
        ns(host, "ip", "mptcp", "endpoint", "add", addr, "dev", dev, "id", str(i), "subflow")


def mptcp_state(*hosts: str) -> str:
    """What decides whether a join happens, per namespace, for a failure message: the PM's
    limits and endpoints, and the nonzero MPTCP and listen-queue counters (a join SYN the
    client never sent, one the server rejected or dropped, an HMAC that failed)."""
    lines = []
    for host in hosts:
        limits = ns(host, "ip", "mptcp", "limits", "show").strip()
        endpoints = ns(host, "ip", "mptcp", "endpoint", "show").strip().replace("\n", "; ")
        counters = [
            " ".join(line.split()[:2])
            for line in ns(host, "nstat", "-saz").splitlines()
            if line.startswith(("MPTcpExt", "TcpExtListen")) and line.split()[1] != "0"
        ]
        lines.append(f"{host}: limits {limits}; endpoints {endpoints or 'none'}")
        lines.append(f"{host}: {', '.join(counters) or 'no MPTCP counter moved'}")
    return "\n".join(lines)


def wait_listening(name: str, port: int | str, server: subprocess.Popen | None = None,
                   limit: float = 30.0) -> None:  # fmt: skip
    """Until a TCP socket of namespace `name` listens on `port` (MPTCP listeners included).
    A fixed sleep after starting a server was too short on a loaded CI machine: the client
    met no listener, or an unready one. Fails naming the port, and the server's status when
    it has already exited."""
    from mprig.run.run_attempt import wait_cmd

    cmd = wait_cmd('listening "$1"', str(port), limit=limit)
    res = subprocess.run(["ip", "netns", "exec", name, *cmd.argv], capture_output=True,
                         check=False, timeout=cmd.timeout)  # fmt: skip
    if res.returncode != 0:
        status = "" if server is None else f"; the server's status: {server.poll()}"
        raise AssertionError(f"{name}: nothing listens on port {port} after {limit:.0f} s{status}")
