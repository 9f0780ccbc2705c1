"""capture.NSTAT_SCRIPT prints what `nstat -asz --json` prints, byte for byte, in a fresh
network namespace whose counters stand still between the two reads (after some UDP, ICMP
and TCP traffic, so that counters are not all zero and the IcmpMsg lines exist)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from mprig import capture

pytestmark = pytest.mark.integration


@pytest.fixture
def ns() -> Iterator[str]:
    name = f"mprig-nstat-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


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
