"""What one connection teaches the kernel reaches the next one, and the per-run flush
(mprig.stack.isolation.FLUSH_SCRIPT) stops it, on this machine's real kernel.

Linux keeps a TCP metrics cache per destination (net/ipv4/tcp_metrics.c): RTT and RTT
variance, the reordering degree, and ssthresh, which kernels before 5.6 save by default
(later ones with net.ipv4.tcp_no_ssthresh_metrics_save=0, set here; the multipath-tcp.org
v0.95 lab kernel is 4.19). A new connection to the same address starts from it: here a
bulk transfer that lost every 300th packet leaves ssthresh 12-14 behind (measured, 5 runs),
and the next connection starts with that ssthresh instead of slow start's unbounded one.
mprig runs many connections to the same addresses on one rig, so without the flush a run
would start from whatever the run before it learned.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from nslink import ns, scratch_ns, sh, veth_pair

from mprig.stack import isolation

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")

PORT = 5301
RECEIVER = f"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT}))
s.listen(4)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.close()
"""
# argv: address, bytes to send, seconds to stay connected first (so `ss` can read the
# connection's starting state); then a clean close (FIN both ways: the kernel saves the
# metrics when the connection ends, not on a reset).
SENDER = f"""
import socket, sys, time
c = socket.create_connection((sys.argv[1], {PORT}))
print("connected", flush=True)
time.sleep(float(sys.argv[3]))
n, buf = int(sys.argv[2]), b"x" * 65536
while n > 0:
    n -= c.send(buf[: min(n, len(buf))])
c.shutdown(socket.SHUT_WR)
c.recv(1)
c.close()
"""


def _python(host: str, code: str, *args: str) -> subprocess.Popen[str]:
    argv = ["ip", "netns", "exec", host, sys.executable, "-c", code, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def _starting_ssthresh(sender: str, addr: str) -> str | None:
    """ssthresh of a fresh, idle connection from sender to addr (None: the kernel's
    initial, infinite one, which `ss` does not print)."""
    p = _python(sender, SENDER, addr, "1", "3")
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "connected"
        info = ns(sender, "ss", "-tinH", "dst", addr, "dport", str(PORT))
        assert "ESTAB" in info, info
    finally:
        p.wait(timeout=30)
        p.stdout.close()  # type: ignore[union-attr]
    found = re.search(r"(?<![a-z_])ssthresh:(\d+)", info)
    return found.group(1) if found else None


def test_a_connection_starts_from_what_the_last_one_learned_until_the_flush() -> None:
    with scratch_ns("mtx") as sender, scratch_ns("mty") as receiver:
        veth_pair((sender, "x0", "10.79.0.1"), (receiver, "y0", "10.79.0.2"))
        for host in (sender, receiver):
            sh("ip", "-n", host, "link", "set", "lo", "up")
        ns(sender, "sysctl", "-q", "-w", "net.ipv4.tcp_no_ssthresh_metrics_save=0",
           "net.ipv4.tcp_congestion_control=reno")  # fmt: skip
        # every 300th data packet to the receiver is lost: the transfer leaves loss recovery
        # behind it in congestion avoidance, so the kernel saves its ssthresh on close
        rules = (
            "add table inet mprig\n"
            "add chain inet mprig in { type filter hook input priority 0; }\n"
            f"add rule inet mprig in tcp dport {PORT} numgen inc mod 300 == 0 drop\n"
        )
        subprocess.run(["ip", "netns", "exec", receiver, "nft", "-f", "-"], input=rules,
                       text=True, check=True)  # fmt: skip
        listener = _python(receiver, RECEIVER)
        try:
            assert listener.stdout is not None and listener.stdout.readline().strip()
            argv = [sys.executable, "-c", SENDER, "10.79.0.2", str(3_000_000), "0"]
            ns(sender, *argv)  # 3 MB, then a clean close
            ns(receiver, "nft", "flush", "ruleset")
            time.sleep(0.2)
            cached = ns(sender, "ip", "tcp_metrics", "show")
            assert " ssthresh " in cached, cached  # the kernel kept what the transfer learned

            leaked = _starting_ssthresh(sender, "10.79.0.2")
            report = isolation.flushed(ns(sender, *isolation.FLUSH_ARGV))
            fresh = _starting_ssthresh(sender, "10.79.0.2")
        finally:
            listener.kill()
            listener.wait()
            listener.stdout.close()  # type: ignore[union-attr]
        print(f"cache: {cached.strip()}; next connection's ssthresh {leaked}, after the "
              f"flush {fresh}; flush report {report}")  # fmt: skip
        assert leaked is not None  # without the flush: the last connection's ssthresh
        assert report["tcp_metrics"] >= 1 and report["tcp_metrics_left"] == 0, report
        assert fresh is None  # after it: the kernel's initial ssthresh, slow start first
