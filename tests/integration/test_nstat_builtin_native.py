"""capture.NSTAT_SCRIPT prints what `nstat -asz --json` prints, byte for byte, in a fresh
network namespace whose counters stand still between the two reads (after some UDP, ICMP
and TCP traffic, so that counters are not all zero and the IcmpMsg lines exist)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from nslink import scratch_ns

from mprig.run import capture

pytestmark = pytest.mark.integration


@pytest.fixture
def ns() -> Iterator[str]:
    with scratch_ns("mprig-nstat") as name:
        yield name


def _in(ns: str, *argv: str) -> str:
    done = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def test_the_builtin_reader_prints_what_nstat_prints(ns: str) -> None:
    _in(ns, "ip", "link", "set", "lo", "up")
    _in(ns, "bash", "-c", "echo x > /dev/udp/127.0.0.1/9")  # answered by ICMP unreachable
    _in(ns, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9 || true")  # a refused TCP connect
    mine = _in(ns, *capture.nstat_argv())
    ref = _in(ns, "nstat", "-asz", "--json")
    assert mine == ref
    counters = json.loads(mine)["kernel"]
    assert counters["UdpNoPorts"] == 1 and counters["IcmpInDestUnreachs"] == 1
    assert counters["IcmpMsgOutType3"] == 1 and counters["TcpAttemptFails"] >= 1
    assert "TcpExtTCPSACKReorder" in counters and "Ip6InReceives" in counters
    assert "TcpMaxConn" not in counters  # one of nstat's seven constants it leaves out


def test_every_snapshot_taken_during_traffic_reads_whole(ns: str) -> None:
    """Counters that change while the reader runs must not tear its snapshot. A CI run
    saved `"IpExt0":MPCapableFallbackSYNACK,...` from a client busy with cross traffic:
    bash's `read` takes /proc in 128-byte chunks and seeks back after each line, and a seek
    on a /proc seq_file prints it again with newer counters, so lines shift. Here a
    loopback TCP transfer runs while the reader takes snapshots back to back; every one must
    be JSON with exactly nstat's counter names."""
    _in(ns, "ip", "link", "set", "lo", "up")
    names = set(json.loads(_in(ns, "nstat", "-asz", "--json"))["kernel"])
    server = subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-s", "-1", "-p", "5391"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    snapshots = []
    try:
        _in(ns, "sleep", "0.3")
        client = subprocess.Popen(
            ["ip", "netns", "exec", ns, "iperf3", "-c", "127.0.0.1", "-p", "5391", "-t", "6",
             "-l", "1k"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        loop = 'for i in $(seq 150); do bash -c "$1" mprig-nstat; done'
        snapshots = _in(ns, "bash", "-c", loop, "loop", capture.NSTAT_SCRIPT).splitlines()
        client.wait(timeout=30)
    finally:
        server.kill()
        server.wait()
    torn = []
    for text in snapshots:
        try:
            got = set(json.loads(text)["kernel"])
        except ValueError as e:
            torn.append(f"not JSON: {e}")
            continue
        if got != names:
            torn.append(f"names differ: {sorted(got ^ names)[:4]}")
    assert (len(snapshots), torn[:3]) == (150, []), f"{len(torn)} of {len(snapshots)} torn"
