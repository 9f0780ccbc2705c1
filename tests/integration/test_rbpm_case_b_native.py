"""Seed 002 case B on the running kernel (prefix h18): the RBPM controller, reading the
server's ss sampler as the runner starts it (`--sender-ss`), acts where the receiver's own
estimates never did (issue 15 part 5), and its decisions and goodput are recorded.

Client and server namespaces joined by four veth pairs (10.118.{1..4}.0/24), the server's
side shaped with tbf at 1, 8, 3 and 2 Mbit/s and 100-packet (150 000 B) queues; no netem
here, so the paths differ by rate and queueing only. Receive buffer 200 KB, Reno, 20 s
downloads over iperf3 from 10.118.1.1, so the initial subflow is the 1 Mbit/s one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nslink import mptcp_hosts, ns, policy_route, veth_pair, wait_listening

from mprig.run import capture, rbpm_run
from mprig.stack import rbpm_policy, rbpm_ss

TAG = f"h18{os.getpid() % 10000}"
CLIENT, SERVER = f"{TAG}c", f"{TAG}s"
RATES = ("1mbit", "8mbit", "3mbit", "2mbit")
SERVER_ADDR = "10.118.1.2"
SLOW = "10.118.1.1"
SECONDS = 20
PORTS = iter(range(5601, 5700))

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)"),
    pytest.mark.slow,
]


def _path_up(i: int, rate: str) -> None:
    cif, sif = f"{TAG}c{i}", f"{TAG}s{i}"
    caddr, saddr = f"10.118.{i}.1", f"10.118.{i}.2"
    veth_pair((CLIENT, cif, caddr), (SERVER, sif, saddr))
    for host, dev in ((SERVER, sif), (CLIENT, cif)):
        ns(host, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "10kb",
           "limit", "150000")  # fmt: skip
    policy_route(CLIENT, i, cif, caddr, "10.118.0.0/16", endpoint=i > 1)


@pytest.fixture(scope="module")
def rig() -> Iterator[None]:
    sysctls = ("net.ipv4.tcp_rmem=4096 204800 204800", "net.ipv4.tcp_congestion_control=reno")
    with mptcp_hosts(CLIENT, SERVER, sysctls=sysctls):
        for i, rate in enumerate(RATES, start=1):
            _path_up(i, rate)
        ns(CLIENT, "ip", "mptcp", "endpoint", "add", SLOW, "dev", f"{TAG}c1", "id", "1")
        yield


def download(tmp: Path, controlled: bool) -> tuple[float, list[dict[str, Any]]]:
    """One iperf3 -R download beside the runner's ss sampler on the server; with the
    controller when `controlled`. Goodput (bit/s, the receiver's) and the controller's log."""
    port = next(PORTS)
    ss_txt, log = tmp / f"ss-{port}.txt", tmp / f"rbpm-{port}.jsonl"
    ex = ["ip", "netns", "exec"]
    with open(ss_txt, "w") as out:
        sampler = subprocess.Popen(
            [*ex, SERVER, *capture.ss_sampler_argv(ports=[port])], stdout=out
        )
    srv = subprocess.Popen([*ex, SERVER, "mptcpize", "run", "iperf3", "-s", "-1", "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    ctl = None
    if controlled:
        args = ["--port", str(port), "--log", str(log), "--sender-ss", str(ss_txt)]
        ctl = subprocess.Popen([*ex, CLIENT, sys.executable, "-I", "-c", rbpm_run.source(), *args])
    try:
        wait_listening(SERVER, port, srv)
        cli = [*ex, CLIENT, "mptcpize", "run", "iperf3", "-c", SERVER_ADDR, "-B", SLOW]
        cli += ["-p", str(port), "-J", "-t", str(SECONDS), "-R"]
        out_json = subprocess.run(cli, capture_output=True, text=True, timeout=90).stdout
        srv.wait(timeout=10)
    finally:
        if ctl is not None:
            ctl.terminate()
            assert ctl.wait(timeout=10) == 0
        sampler.terminate()
        sampler.wait(timeout=10)
    bps = json.loads(out_json)["end"]["sum_received"]["bits_per_second"]
    lines = log.read_text().splitlines() if controlled else []
    return bps, [json.loads(line) for line in lines]


def summary(log: list[dict[str, Any]]) -> dict[str, Any]:
    """What the controller did: its actions with their times (s after start), and the share
    of steps in which the 1 Mbit/s subflow was stopped."""
    t0 = log[0]["t"]
    steps = [r for r in log if r["event"] == "step"]
    acts = [(round(r["t"] - t0, 1), r["decision"]["action"], len(r["decision"]["targets"]))
            for r in steps if r["decision"]["action"] != "none"]  # fmt: skip
    slow_off = [any(f["addr"] == SLOW and not f["active"] for f in r["decision"]["subflows"])
                for r in steps]  # fmt: skip
    other = sorted({r["event"] for r in log} - {"start", "step", "stop"})
    return {"actions": acts[:12], "n_actions": len(acts), "other_events": other,
            "slow_stopped": round(sum(slow_off) / max(1, len(steps)), 2)}  # fmt: skip


@pytest.fixture(scope="module")
def runs(rig: None) -> list[tuple[float, float, list[dict[str, Any]]]]:
    """Two pairs: (without RBPM, with RBPM, the controller's log)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="h18rbpm-") as tmp:
        for _ in range(int(os.environ.get("MPRIG_RBPM_PAIRS", "2"))):
            plain, _ = download(Path(tmp), False)
            controlled, log = download(Path(tmp), True)
            out.append((plain, controlled, log))
    print("case B goodput Mbit/s (without, with):",
          [(round(p / 1e6, 2), round(c / 1e6, 2)) for p, c, _ in out])  # fmt: skip
    for _, _, log in out:
        print("  controller:", summary(log))
    return out


def test_controller_acts_on_the_senders_inputs_and_stops_the_1_mbit_path(
    runs: list[tuple[float, float, list[dict[str, Any]]]],
) -> None:
    """Each first stop is Algorithm 1's decision on the sender's inputs it logged, and the
    1 Mbit/s path is stopped (under its endpoint, id 1) for most of the download. Which
    subflow goes first is the algorithm's call on one early snapshot: with 150 kB queues the
    sender's RTTs swing with the queues, and a CI run beside the VM tests saw the 3 Mbit/s
    path's score fall below the 1 Mbit/s one's at 1.3 s (both then stopped for 99 % of the
    steps), so the check replays the decision instead of naming its first target."""
    sub = rbpm_policy.Subflow
    for _, _, log in runs:
        steps = [r["decision"] for r in log if r["event"] == "step"]
        stops = [s for s in steps if s["action"] == "backup"]
        assert (log[0]["event"], log[-1]["event"], len(stops) >= 1) == ("start", "stop", True)
        first = stops[0]
        flows = [sub(f["key"], f["addr"], f["rtt_ms"], f["mss"], f["pkts"], f["bw_Bps"],
                     f["active"]) for f in first["subflows"]]  # fmt: skip
        replay = rbpm_policy.decide(flows, first["free"], may_enable=False)
        assert (first["inputs"], first["targets"]) == ("sender", list(replay.targets))
        assert abs(rbpm_policy.required_bytes(flows) - first["required"]) <= 1
        assert first["required"] > first["free"]
        [slow] = [f["key"] for f in first["subflows"] if f["addr"] == SLOW]
        assert 1 in {s["endpoints"].get(slow) for s in stops}, stops
        later = steps[steps.index(first) :]
        off = [f["key"] == slow and not f["active"] for s in later for f in s["subflows"]]
        assert sum(off) >= len(later) / 2, summary(log)
    flags = rbpm_ss.parse_endpoints(ns(CLIENT, "ip", "mptcp", "endpoint", "show"))
    assert {a: b for a, (_, b) in flags.items()} == {f"10.118.{i}.1": False for i in range(1, 5)}
