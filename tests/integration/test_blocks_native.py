"""The block workload over real MPTCP (prefix h12): a server in one namespace writes 8 KB
blocks to a client in another over two tbf-shaped paths (8 and 2 Mbit/s); the client logs
every block with the time it was sent, and every block arrives whole, in order, once."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nslink import mptcp_hosts, ns, policy_route, veth_pair

from mprig.run import traffic

TAG = f"h12{os.getpid() % 10000}"
CLIENT, SERVER = f"{TAG}c", f"{TAG}s"
RATES = ("8mbit", "2mbit")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")


@pytest.fixture(scope="module")
def rig() -> Iterator[None]:
    with mptcp_hosts(CLIENT, SERVER):
        for i, rate in enumerate(RATES, start=1):
            cif, sif, caddr = f"{TAG}c{i}", f"{TAG}s{i}", f"10.112.{i}.1"
            veth_pair((CLIENT, cif, caddr), (SERVER, sif, f"10.112.{i}.2"))
            ns(SERVER, "tc", "qdisc", "add", "dev", sif, "root", "tbf", "rate", rate,
               "burst", "10kb", "limit", "60kb")  # fmt: skip
            policy_route(CLIENT, i, cif, caddr, "10.112.0.0/16")
        yield


def test_every_block_arrives_once_in_order_with_its_delay(rig: None) -> None:
    with tempfile.TemporaryDirectory(prefix="h12blocks-") as tmp:
        log, sent = Path(tmp) / "blocks.jsonl", Path(tmp) / "sent.json"
        common = {"block_bytes": 8192, "interval_ms": 0.0, "duration_s": 4.0, "mptcp": True}
        # a download, as the runner runs it: the server listens and sends, the client
        # connects from its first path (its endpoints add the second subflow) and receives
        send = traffic.blocks_argv("listen", "10.112.1.2", send=True, out=str(sent), **common)
        argv = ["ip", "netns", "exec", SERVER, *send]
        with subprocess.Popen(argv, stdout=subprocess.PIPE) as server:  # closed on a failure too
            assert server.stdout is not None and server.stdout.readline() == b"listening\n"
            recv = traffic.blocks_argv("connect", "10.112.1.2", send=False, out=str(log),
                                       bind="10.112.1.1", **common)  # fmt: skip
            t0 = time.monotonic()
            subprocess.run(["ip", "netns", "exec", CLIENT, *recv], check=True, timeout=30)
            server.communicate(timeout=10)
        rows = [json.loads(x) for x in log.read_text().splitlines()]
        blocks = json.loads(sent.read_text())["blocks"]
        got = traffic.parse_blocks(log.read_text())
    assert time.monotonic() - t0 < 15
    assert [r["seq"] for r in rows] == list(range(blocks))
    assert (got.n, got.missing) == (blocks, 0)
    # back to back over 8 + 2 Mbit/s: the blocks arrive at no more than the paths' rate
    # (how many the sender wrote in its 4 s also counts what its send buffer held, which
    # autotuning sizes: 709 in one CI run, so a cap on the count is not the measure), and
    # the send buffer queues blocks, so a block waits tens of ms or more
    assert blocks > 50, blocks
    assert got.n * common["block_bytes"] * 8 / got.span_s < 10.5e6, (got.n, got.span_s)
    assert 0 < got.p50_ms <= got.p95_ms <= got.p99_ms <= got.max_ms < 10_000, got
