"""The application workloads over real MPTCP (prefix h18): the agents of mprig/run/apps.py in
two namespaces joined by one tbf-shaped path (the host has no sch_netem). Requests: every
request is logged with a positive completion time, and large responses take longer than
small ones over the shaped path. CBR: deadline misses are about 0 below the path's rate and
most frames miss above it."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nslink import mptcp_hosts, ns, policy_route, veth_pair

from mprig.run import apps

TAG = f"h18{os.getpid() % 10000}"
CLIENT, SERVER = f"{TAG}c", f"{TAG}s"
SERVER_ADDR, CLIENT_ADDR = "10.118.1.2", "10.118.1.1"
RATE_MBIT = 4  # the path's rate, server -> client (tbf)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")


@pytest.fixture(scope="module")
def rig() -> Iterator[None]:
    with mptcp_hosts(CLIENT, SERVER):
        cif, sif = f"{TAG}c1", f"{TAG}s1"
        veth_pair((CLIENT, cif, CLIENT_ADDR), (SERVER, sif, SERVER_ADDR))
        ns(SERVER, "tc", "qdisc", "add", "dev", sif, "root", "tbf", "rate", f"{RATE_MBIT}mbit",
           "burst", "10kb", "limit", "60kb")  # fmt: skip
        policy_route(CLIENT, 1, cif, CLIENT_ADDR, "10.118.0.0/16")
        yield


def run_pair(modes: tuple[str, str], cfg: dict[str, Any], tmp: Path) -> tuple[Path, Path]:
    """The server end (listening) and the client end, as the runner starts them; the
    server is stopped with TERM once the client is done (the runner's stop stage)."""
    outs = (tmp / "server.out", tmp / "client.out")
    common: dict[str, Any] = {"mptcp": True, "cfg": cfg}
    srv = apps.agent_argv(modes[0], "listen", SERVER_ADDR, out=str(outs[0]), **common)
    cli = apps.agent_argv(modes[1], "connect", SERVER_ADDR, out=str(outs[1]),
                          bind=CLIENT_ADDR, **common)  # fmt: skip
    server = subprocess.Popen(["ip", "netns", "exec", SERVER, *srv], stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline() == b"listening\n"
        subprocess.run(["ip", "netns", "exec", CLIENT, *cli], check=True, timeout=30)
    finally:
        server.terminate()
        server.communicate(timeout=10)
    return outs


def test_requests_are_logged_each_with_its_time_and_large_ones_take_longer(
    rig: None, tmp_path: Path
) -> None:
    cfg = {"count": 30, "request_bytes": 100, "think_ms": 0, "connection": "persistent",
           "response": {"dist": "choice", "sizes": [2_000, 150_000]}, "seed": 5,
           "duration_s": 20}  # fmt: skip
    served, log = run_pair(("requests-server", "requests-client"), cfg, tmp_path)
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["seq"] for r in rows] == list(range(30))
    assert all(r["ok"] and r["time_s"] > 0 for r in rows), rows
    assert json.loads(served.read_text()) == {
        "requests": 30, "bytes": sum(r["bytes"] for r in rows), "connections": 1}  # fmt: skip
    by_size = {s: [r["time_s"] for r in rows if r["bytes"] == s] for s in (2_000, 150_000)}
    small, large = (statistics.median(by_size[s]) for s in (2_000, 150_000))
    # 150 KB at 4 Mbit/s take 300 ms on the wire; 2 KB take a few ms
    assert 0.25 < large < 2.0 and large > 10 * small, (small, large)


def test_a_connection_per_request_opens_one_connection_each(rig: None, tmp_path: Path) -> None:
    cfg = {"count": 10, "request_bytes": 64, "think_ms": 20, "connection": "per_request",
           "response": {"dist": "fixed", "bytes": 10_000}, "seed": 1, "duration_s": 20}  # fmt: skip
    served, log = run_pair(("requests-server", "requests-client"), cfg, tmp_path)
    got = apps.parse_requests(log.read_text())
    assert (got.n, got.completed, got.failures) == (10, 10, 0)
    assert json.loads(served.read_text()) == {"requests": 10, "bytes": 100_000,
                                              "connections": 10}  # fmt: skip


def cbr_config(rate_mbit: float, duration_s: float = 3, deadline_ms: float = 150) -> dict[str, Any]:
    fps = 50
    return {"frame_bytes": round(rate_mbit * 1e6 / 8 / fps), "fps": fps,
            "frames": round(duration_s * fps), "duration_s": duration_s,
            "deadline_ms": deadline_ms}  # fmt: skip


@pytest.mark.parametrize(("rate_mbit", "misses"), [(1, (0, 0.02)), (8, (0.5, 1))])
def test_cbr_misses_deadlines_only_above_the_path_rate(
    rig: None, tmp_path: Path, rate_mbit: float, misses: tuple[float, float]
) -> None:
    cfg = cbr_config(rate_mbit)
    sent, log = run_pair(("cbr-send", "cbr-recv"), cfg, tmp_path)
    got = apps.parse_cbr(log.read_text(), cfg["frames"], cfg["deadline_ms"])
    count = json.loads(sent.read_text())
    assert (count["frames"], count["frame_bytes"]) == (150, cfg["frame_bytes"])
    assert misses[0] <= got.miss_ratio <= misses[1], got
    assert got.received > 0 and got.p50_ms is not None and got.p50_ms > 0, got
    if rate_mbit < RATE_MBIT:  # everything sent and received, within a few ms
        assert (count["sent"], got.received) == (150, 150)
        assert got.p50_ms < 50, got
