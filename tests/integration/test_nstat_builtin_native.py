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
