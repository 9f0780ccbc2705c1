"""The ss sampler keeps its configured interval (issue 14, part 6): run natively in a
namespace beside a real TCP transfer for a few seconds, its samples come every 100 ms on a
fixed schedule (no drift by the cost of each sample), and what a run records as the
achieved interval is what the timestamps show."""

from __future__ import annotations

import itertools
import os
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nslink import sh, veth_pair, wait_listening

from mprig.run import capture, traffic

SND, RCV = "mprig-ss-snd", "mprig-ss-rcv"


@pytest.fixture
def flow() -> Iterator[None]:
    """A TCP transfer on the traffic port from SND to RCV for about 8 s."""
    for name in (SND, RCV):
        sh("ip", "netns", "add", name)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        veth_pair((SND, "s0", "10.66.0.1"), (RCV, "r0", "10.66.0.2"))
        port = str(traffic.IPERF3_PORT)
        server = ["ip", "netns", "exec", RCV, "iperf3", "-s", "-1", "-p", port]
        procs.append(subprocess.Popen(server, stdout=subprocess.DEVNULL))
        wait_listening(RCV, port, procs[-1])
        client = ["iperf3", "-c", "10.66.0.2", "-p", port, "-t", "8", "-b", "200M"]
        procs.append(subprocess.Popen(["ip", "netns", "exec", SND, *client],
                                      stdout=subprocess.DEVNULL))  # fmt: skip
        time.sleep(0.5)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for name in (SND, RCV):
            subprocess.run(["ip", "netns", "del", name], check=False)


def test_samples_every_configured_interval(flow: None, tmp_path: Path) -> None:
    out = tmp_path / "ss.txt"
    with out.open("w") as f:
        argv = ["ip", "netns", "exec", SND, *capture.ss_sampler_argv()]
        p = subprocess.Popen(argv, stdout=f, start_new_session=True)
        deadline = time.monotonic() + 30  # its first sample (a cold Python start), then 4 s
        while not out.stat().st_size and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(4)
        os.killpg(p.pid, signal.SIGTERM)
        p.wait()
    samples = capture.parse_ss_samples(out.read_text())
    times = [s.time for s in samples]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    want = capture.SS_INTERVAL_S
    assert len(samples) >= 30
    assert all(any(":5201" in line for line, _ in s.sockets) for s in samples)
    # the schedule: median gap and the mean over the whole span (no drift) at the interval
    assert abs(statistics.median(gaps) - want) <= 0.2 * want, gaps
    assert abs((times[-1] - times[0]) / len(gaps) - want) <= 0.05 * want, gaps
    # what a run records is what the timestamps show
    got = capture.ss_interval(samples)
    assert got == {
        "configured_s": want,
        "median_s": round(statistics.median(gaps), 4),
        "p95_s": round(sorted(gaps)[round(0.95 * (len(gaps) - 1))], 4),
        "samples": len(samples),
    }
