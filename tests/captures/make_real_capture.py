"""Record a real two-path MPTCP transfer on the running kernel (root needed), for
tests/unit/test_collectors_real.py.

    sudo .venv/bin/python tests/captures/make_real_capture.py

Two namespaces (h4-cli, h4-srv) joined by two veth pairs with offloads off; the server
announces its second address (ADD_ADDR), the client opens a second subflow to it; TBF
shapes the client's egress to 20 and 5 Mbit/s so the paths queue differently and data
arrives out of order. The client sends SIZE bytes through an IPPROTO_MPTCP socket;
tcpdump -i any (Linux SLL2, snaplen 200) records the receiver (server) side.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "test_collectors_real" / "two_path_upload.pcap"
CLI, SRV = "h4-cli", "h4-srv"
SIZE = 2_000_000
PORT = 5201
LINKS = [("h4c0", "h4s0", "10.40.1", "20mbit"), ("h4c1", "h4s1", "10.40.2", "5mbit")]

SERVER = f"""
import hashlib, socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT})); s.listen(1)
print("listening", flush=True)
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    h.update(b); n += len(b)
print(n, h.hexdigest(), flush=True)
"""

CLIENT = f"""
import socket
data = bytes(range(256)) * ({SIZE} // 256) + bytes({SIZE} % 256)
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
c.connect(("10.40.1.2", {PORT}))
import time; time.sleep(0.3)  # let the second subflow join before the bulk
c.sendall(data); c.shutdown(socket.SHUT_WR); c.recv(1); c.close()
"""


def sh(*argv: str, ns: str | None = None) -> None:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    subprocess.run(cmd, check=True)


def setup() -> None:
    for ns in (CLI, SRV):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2", ns=ns)
    for c, s, net, rate in LINKS:
        sh("ip", "link", "add", c, "netns", CLI, "type", "veth", "peer", "name", s, "netns", SRV)
        for ns, dev, host in ((CLI, c, 1), (SRV, s, 2)):
            sh("ip", "addr", "add", f"{net}.{host}/24", "dev", dev, ns=ns)
            sh("ip", "link", "set", dev, "up", ns=ns)
            sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns)
        sh("tc", "qdisc", "add", "dev", c, "root", "tbf", "rate", rate, "burst", "16kb",
           "latency", "200ms", ns=CLI)  # fmt: skip
    sh("ip", "mptcp", "endpoint", "add", "10.40.2.2", "dev", "h4s1", "signal", ns=SRV)


def teardown() -> None:
    for ns in (CLI, SRV):
        subprocess.run(["ip", "netns", "del", ns], check=False, stderr=subprocess.DEVNULL)


def record() -> str:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    dump = subprocess.Popen(["ip", "netns", "exec", SRV, "tcpdump", "-i", "any", "-s", "200",
                             "-B", "16384", "-U", "-w", str(OUT), "tcp", "port", str(PORT)],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    srv = subprocess.Popen(["ip", "netns", "exec", SRV, sys.executable, "-c", SERVER],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert srv.stdout and srv.stdout.readline().strip() == "listening"
        time.sleep(1.0)  # tcpdump is ready
        sh(sys.executable, "-c", CLIENT, ns=CLI)
        result = srv.stdout.readline().strip()
        time.sleep(2.0)  # tcpdump drains its buffer
    finally:
        srv.kill()
        dump.terminate()
        _, err = dump.communicate(timeout=10)
        srv.wait(timeout=10)
    print(err.strip())
    seen = re.findall(r"^(\d+) packets (?:captured|received by filter)$", err, re.M)
    if "\n0 packets dropped by kernel" not in err or len(seen) != 2 or seen[0] != seen[1]:
        raise SystemExit("tcpdump lost packets: run again on a quieter machine")
    return result


def main() -> None:
    teardown()
    try:
        setup()
        result = record()
    finally:
        teardown()
    data = bytes(range(256)) * (SIZE // 256) + bytes(SIZE % 256)
    expected = f"{SIZE} {hashlib.sha256(data).hexdigest()}"
    print(f"server received: {result}; expected {expected}; capture {OUT}")
    if result != expected:
        raise SystemExit("transfer incomplete")
    from collectors.analyze import analyze_pcap

    (conn,) = analyze_pcap(OUT).connections
    if conn.summary()["delivered_bytes"] != SIZE:
        raise SystemExit("the capture misses data: run again")


if __name__ == "__main__":
    main()
