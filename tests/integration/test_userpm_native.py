"""The userspace path manager on the running kernel (prefix h4u): net.mptcp.pm_type=1 alone
keeps a connection on its first subflow; mptcpd with mprig's plugin
(kernel-configs/mptcpd/mprig_fullmesh.c, built by `make mptcpd-plugin`) adds one from the
second path, and data crosses both. Then `mprig run` of a path_manager: userspace campaign
on a native virtual rig: mptcpd.log in the bundle shows the plugin's subflows, and the
capture shows both paths carrying the transfer.

Namespace part: client and server joined by two veth pairs (10.131.{1,2}.0/24), each side
shaped by tbf at 10 Mbit/s, policy routing per client address; the server keeps the
kernel's path manager (pm_type 0), as the runner leaves it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nslink import mptcp_hosts, ns, policy_route, veth_pair, wait_listening

from mprig.stack import userpm

TAG = f"h4u{os.getpid() % 10000}"
CLIENT, SERVER = f"{TAG}c", f"{TAG}s"
SERVER_ADDR = "10.131.1.2"
PLUGIN = userpm.plugin_dir() / f"{userpm.PLUGIN}.so"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)"),
    pytest.mark.skipif(not PLUGIN.is_file(), reason="run `make mptcpd-plugin` first"),
]

# A client that sends for $2 seconds over MPTCP from 10.131.1.1 (the first path), then
# closes; the server counts what arrived.
SEND = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
s.bind(("10.131.1.1", 0)); s.connect(("10.131.1.2", int(sys.argv[1])))
end, buf = time.time() + float(sys.argv[2]), b"x" * 65536
while time.time() < end:
    s.sendall(buf)
s.close()
"""
RECV = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.131.1.2", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept(); n = 0
while (b := c.recv(65536)):
    n += len(b)
print(n)
"""


@pytest.fixture(scope="module")
def rig() -> Iterator[None]:
    """Two shaped paths; the client has the userspace path manager and no endpoints."""
    with mptcp_hosts(CLIENT, SERVER, sysctls=("net.mptcp.enabled=1",)):
        for i in (1, 2):
            cif, sif = f"{TAG}c{i}", f"{TAG}s{i}"
            veth_pair((CLIENT, cif, f"10.131.{i}.1"), (SERVER, sif, f"10.131.{i}.2"))
            for host, dev in ((CLIENT, cif), (SERVER, sif)):
                ns(host, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "10mbit",
                   "burst", "10kb", "limit", "30kb")  # fmt: skip
            policy_route(CLIENT, i, cif, f"10.131.{i}.1", "10.131.0.0/16", endpoint=False)
        ns(CLIENT, "sysctl", "-q", "-w", "net.mptcp.pm_type=1")
        yield


def tx_bytes(dev: str) -> int:
    link = json.loads(ns(CLIENT, "ip", "-s", "-j", "link", "show", "dev", dev))[0]
    return int(link["stats64"]["tx"]["bytes"])


def transfer(port: int, seconds: float = 2.0) -> dict[str, int]:
    """Bytes each client interface sent during one upload, and the client's join counters."""
    devs = [f"{TAG}c1", f"{TAG}c2"]
    ns(CLIENT, "nstat", "-n")
    before = {d: tx_bytes(d) for d in devs}
    server = subprocess.Popen(["ip", "netns", "exec", SERVER, sys.executable, "-c", RECV,
                               str(port)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    wait_listening(SERVER, port, server)
    ns(CLIENT, sys.executable, "-c", SEND, str(port), str(seconds))
    received = int(server.communicate(timeout=30)[0])
    out = {d: tx_bytes(d) - before[d] for d in devs}
    counters = ns(CLIENT, "nstat", "-a", "-j")  # since the -n above
    kernel = json.loads(counters)["kernel"]
    out |= {k: int(kernel.get(k, 0)) for k in ("MPTcpExtMPJoinSynTx", "MPTcpExtMPJoinSynAckRx")}
    return out | {"received": received}


def test_pm_type_1_without_mptcpd_stays_on_one_subflow(rig: None) -> None:
    got = transfer(5301)
    assert (got["MPTcpExtMPJoinSynTx"], got["MPTcpExtMPJoinSynAckRx"]) == (0, 0), got
    assert got[f"{TAG}c1"] > 1_000_000 and got[f"{TAG}c2"] < 20_000, got


def test_the_plugin_adds_a_subflow_on_the_second_path(rig: None, tmp_path: Path) -> None:
    log = tmp_path / "mptcpd.log"
    argv = userpm.mptcpd_argv([f"{TAG}c1", f"{TAG}c2"], userpm.plugin_dir())
    with log.open("w") as out:
        daemon = subprocess.Popen(["ip", "netns", "exec", CLIENT, *argv], stderr=out,
                                  start_new_session=True)  # fmt: skip
    try:
        _wait_for(log, userpm.READY)
        got = transfer(5302)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=10)
    summary = userpm.parse_log(log.read_text())
    assert (got["MPTcpExtMPJoinSynTx"], got["MPTcpExtMPJoinSynAckRx"]) == (1, 1), got
    # both paths carried the upload: each at least a quarter of what arrived
    assert min(got[f"{TAG}c1"], got[f"{TAG}c2"]) > got["received"] / 4, got
    assert (summary.requested, summary.refused, summary.established) == (1, 0, 1)
    assert (summary.ready, summary.stopped, summary.errors) == (True, True, ())
    assert "add subflow 10.131.2.1:0 (local id 1) -> 10.131.1.2:5302: requested" in log.read_text()


def _wait_for(log: Path, text: str, limit: float = 10.0) -> None:
    end = time.monotonic() + limit
    while text not in log.read_text():
        assert time.monotonic() < end, log.read_text()
        time.sleep(0.05)


CAMPAIGN = """\
name: h4upm
paths:
  - {name: wifi, kind: wifi, rate_mbit: 10, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 20}
variants:
  - {name: upm, protocol: mptcp, path_manager: userspace}
traffic: {tool: iperf3, duration_s: 3}
"""


def test_campaign_with_userspace_pm_uses_both_paths(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    env = {**os.environ, "MPRIG_BENCH_TBF_FOR_NETEM": "1"}  # this host has no sch_netem
    run = [sys.executable, "-m", "mprig.cli", "run", str(spec), "--no-vm", "--rig", TAG[:6],
           "--results", str(tmp_path), "--quiet"]  # fmt: skip
    p = subprocess.run(run, capture_output=True, text=True, timeout=400, env=env, check=False)
    assert p.returncode == 0, p.stderr
    collect = [
        sys.executable,
        "-m",
        "mprig.cli",
        "collect",
        str(tmp_path / "h4upm"),
        "--quiet",
    ]
    subprocess.run(collect, capture_output=True, text=True, timeout=300, check=True)
    (bundle,) = (tmp_path / "h4upm").glob("upm-*")
    log = userpm.parse_log((bundle / "mptcpd.log").read_text())
    # iperf3's control and data connections: one subflow each from the cellular address
    assert (log.requested, log.refused, log.established, log.stopped) == (2, 0, 2, True)
    assert "add subflow 10.2.1.2:0" in (bundle / "mptcpd.log").read_text()
    metrics = json.loads((bundle / "metrics.json").read_text())
    data = [s for s in metrics["subflows"] if s["bytes"] > 1_000_000]
    assert [(s["path"], s["join"]) for s in data] == [("wifi", False), ("cell", True)]
    record = json.loads((bundle / "run.json").read_text())
    client = record["settings"]["client"]
    assert (client["sysctls"]["net.mptcp.pm_type"], client["endpoints"]) == ("1", [])
    assert record["settings"]["server"]["sysctls"]["net.mptcp.pm_type"] == "0"
