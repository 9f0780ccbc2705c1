"""Record a real two-path MPTCP transfer on a real kernel (root needed), for
tests/unit/test_collectors_real.py.

    sudo .venv/bin/python tests/captures/make_real_capture.py
    # netem variant, inside the VM (the running kernel has no sch_netem):
    flock /tmp/mprig-vm.lock vng --run /boot/vmlinuz-6.1.0-56-amd64 --disable-kvm \\
        --rwdir /tmp/out --exec ".venv/bin/python tests/captures/make_real_capture.py \\
        --netem --out /tmp/out"

Two namespaces (h4-cli, h4-srv) joined by two veth pairs with offloads off; the server
announces its second address (ADD_ADDR), the client opens a second subflow to it. Default:
TBF shapes the client's egress to 20 and 5 Mbit/s so the paths queue differently and data
arrives out of order. --netem: netem adds 10 and 40 ms delay and 0.5 % loss on each path
(20 and 5 Mbit/s), and the receiver's `nstat` MPTcpExt deltas are saved beside the capture
(<name>.nstat.txt) for the out-of-order cross-check. The client sends SIZE bytes through an
IPPROTO_MPTCP socket; tcpdump -i any (Linux SLL2, snaplen 200) records the receiver
(server) side. The script fails unless the server got every byte and tcpdump every packet.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "test_collectors_real"
CLI, SRV = "h4-cli", "h4-srv"
PORT = 5201
LINKS = [
    ("h4c0", "h4s0", "10.40.1", "20mbit", "10ms"),
    ("h4c1", "h4s1", "10.40.2", "5mbit", "40ms"),
]

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

CLIENT = """
import socket, sys, time
size = int(sys.argv[1])
data = bytes(range(256)) * (size // 256) + bytes(size % 256)
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
c.connect(("10.40.1.2", {port}))
time.sleep(0.3)  # let the second subflow join before the bulk
c.sendall(data); c.shutdown(socket.SHUT_WR); c.recv(1); c.close()
""".replace("{port}", str(PORT))


def payload(size: int) -> bytes:
    return bytes(range(256)) * (size // 256) + bytes(size % 256)


def sh(*argv: str, ns: str | None = None) -> None:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    subprocess.run(cmd, check=True)


def setup(netem: bool) -> None:
    for ns in (CLI, SRV):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2", ns=ns)
    for c, s, net, rate, delay in LINKS:
        sh("ip", "link", "add", c, "netns", CLI, "type", "veth", "peer", "name", s, "netns", SRV)
        for ns, dev, host in ((CLI, c, 1), (SRV, s, 2)):
            sh("ip", "addr", "add", f"{net}.{host}/24", "dev", dev, ns=ns)
            sh("ip", "link", "set", dev, "up", ns=ns)
            sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns)
        qdisc = (["netem", "delay", delay, "loss", "0.5%", "rate", rate] if netem
                 else ["tbf", "rate", rate, "burst", "16kb", "latency", "200ms"])  # fmt: skip
        sh("tc", "qdisc", "add", "dev", c, "root", *qdisc, ns=CLI)
    sh("ip", "mptcp", "endpoint", "add", "10.40.2.2", "dev", "h4s1", "signal", ns=SRV)


def teardown() -> None:
    for ns in (CLI, SRV):
        subprocess.run(["ip", "netns", "del", ns], check=False, stderr=subprocess.DEVNULL)


def nstat(*args: str) -> str:
    argv = ["ip", "netns", "exec", SRV, "nstat", *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def record(pcap: Path, size: int) -> tuple[str, str]:
    """Runs the transfer under tcpdump; returns the server's answer and the nstat deltas."""
    dump = subprocess.Popen(["ip", "netns", "exec", SRV, "tcpdump", "-i", "any", "-s", "200",
                             "-B", "16384", "-U", "-w", str(pcap), "tcp", "port", str(PORT)],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    srv = subprocess.Popen(["ip", "netns", "exec", SRV, sys.executable, "-c", SERVER],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert srv.stdout and srv.stdout.readline().strip() == "listening"
        time.sleep(1.0)  # tcpdump is ready
        nstat("-n")  # start the counters' history here
        sh(sys.executable, "-c", CLIENT, str(size), ns=CLI)
        result = srv.stdout.readline().strip()
        counters = nstat("-az", "MPTcpExt*")
        time.sleep(6.0)  # tcpdump drains its buffer (slow in an emulated VM)
    finally:
        srv.kill()
        dump.terminate()
        _, err = dump.communicate(timeout=30)
        srv.wait(timeout=10)
    print(err.strip())
    seen = re.findall(r"^(\d+) packets (?:captured|received by filter)$", err, re.M)
    if "\n0 packets dropped by kernel" not in err or len(seen) != 2 or seen[0] != seen[1]:
        raise SystemExit("tcpdump lost packets: run again on a quieter machine")
    return result, counters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--netem", action="store_true", help="netem delay and loss (VM kernels)")
    ap.add_argument("--out", type=Path, default=HERE, help="directory for the capture")
    args = ap.parse_args()
    size = 3_000_000 if args.netem else 2_000_000
    pcap = args.out / ("two_path_netem_vm.pcap" if args.netem else "two_path_upload.pcap")
    args.out.mkdir(parents=True, exist_ok=True)
    teardown()
    try:
        setup(args.netem)
        result, counters = record(pcap, size)
    finally:
        teardown()
    expected = f"{size} {hashlib.sha256(payload(size)).hexdigest()}"
    print(f"server received: {result}; expected {expected}; capture {pcap}")
    if result != expected:
        raise SystemExit("transfer incomplete")
    if args.netem:
        pcap.with_suffix(".nstat.txt").write_text(counters)
    from collectors.analyze import analyze_pcap

    (conn,) = analyze_pcap(pcap).connections
    if conn.summary()["delivered_bytes"] != size:
        raise SystemExit("the capture misses data: run again")


if __name__ == "__main__":
    main()
