"""The latency probe's script for real (prefix h1p): two probes at once in a client
namespace, each from its own address on its own veth, to one server namespace, whose
kernel answers their ICMP timestamp requests; each matches only its own replies (a raw
ICMP socket sees every reply), every probe is answered once with one-way delays that fit
in its RTT (one clock), and stopped with TERM, as the runner stops it, each log parses
whole."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from nslink import sh, veth_pair

from mprig.run import latency

TAG = f"h1p{os.getpid() % 10000}"
CLIENT, SERVER = f"{TAG}c", f"{TAG}s"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")


def test_probe_logs_every_echo_and_its_reply_per_path() -> None:
    try:
        for host in (CLIENT, SERVER):
            sh("ip", "netns", "add", host)
            sh("ip", "-n", host, "link", "set", "lo", "up")
        veth_pair((CLIENT, f"{TAG}a", "10.151.1.1"), (SERVER, f"{TAG}x", "10.151.1.2"))
        veth_pair((CLIENT, f"{TAG}b", "10.151.2.1"), (SERVER, f"{TAG}y", "10.151.2.2"))
        logs = _probe({"a": "10.151.1.1", "b": "10.151.2.1"}, "10.151.1.2", seconds=1.5)
    finally:
        for host in (CLIENT, SERVER):
            subprocess.run(["ip", "netns", "del", host], capture_output=True, check=False)
    a, b = (latency.parse(logs[p]) for p in ("a", "b"))
    assert [e.seq for e in a] == list(range(1, len(a) + 1))
    assert 5 <= len(a) <= 32, len(a)  # every 50 ms for 1.5 s, less the interpreter start-up
    assert all(e.rtt_ms is not None and 0 < e.rtt_ms < 20 for e in a[:-1]), a
    # one clock: each one-way delay is within the stamps' 1 ms resolution of the RTT's share
    assert all(-1 <= e.up_ms <= e.rtt_ms + 1 for e in a[:-1] if e.up_ms is not None), a
    assert all(-1 <= e.down_ms <= e.rtt_ms + 1 for e in a[:-1] if e.down_ms is not None), a
    assert sum(e.up_ms is not None and e.down_ms is not None for e in a) >= len(a) - 1
    window = (a[0].sent, a[-1].sent)
    assert latency.summarise(a[:-1], window)["lost"] == 0
    assert [e.seq for e in b] == list(range(1, len(b) + 1))
    assert all(e.rtt_ms is not None for e in b[:-1]), b


def _probe(sources: dict[str, str], dst: str, seconds: float) -> dict[str, str]:
    """Run one probe per source for `seconds`, stop them with TERM; their logs."""
    with tempfile.TemporaryDirectory(prefix="h1probe-") as tmp:
        procs = {}
        for name, src in sources.items():
            out = open(Path(tmp) / name, "w")  # noqa: SIM115 - closed with the process
            argv = ["ip", "netns", "exec", CLIENT, *latency.probe_argv(src, dst, 50)]
            procs[name] = (subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT), out)
        time.sleep(seconds)
        for proc, out in procs.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=5)
            out.close()
        return {name: (Path(tmp) / name).read_text() for name in sources}
