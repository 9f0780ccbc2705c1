"""RBPM on the running kernel (prefix h11): marking a client endpoint backup (MP_PRIO) moves
the server's data off that subflow, the initial subflow's included; and the controller,
run on the client exactly as the runner sends it (`python3 -c <mprig/stack/rbpm.py>`), stops the
slow path of a buffer-blocked download, logs why, raises the goodput, and clears its flags.

Client and server namespaces joined by three veth pairs (10.111.{1,2,3}.0/24); the
server's side of each is shaped with tbf (no netem here): two 10 Mbit/s paths and one
256 kbit/s path, whose 1500-byte serialisation alone (47 ms) makes its RTT several times
the others'. Policy routing sends each client address out of its own path; the client's
kernel path manager opens one subflow per endpoint to the server's first address.
Receive buffer 100 kB, Reno: the slow path's late packets block the buffer.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostload import HostLoad
from nslink import mptcp_hosts, ns, policy_route, veth_pair, wait_listening

from mprig.run import rbpm_run
from mprig.stack import rbpm_policy, rbpm_ss

TAG = f"h11{os.getpid() % 10000}"
CLIENT, SERVER = f"{TAG}c", f"{TAG}s"
RATES = ("10mbit", "10mbit", "256kbit")
SERVER_ADDR = "10.111.1.2"
PORTS = iter(range(5401, 5500))  # one port per transfer: no earlier socket is sampled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")


def _path_up(i: int, rate: str) -> None:
    cif, sif = f"{TAG}c{i}", f"{TAG}s{i}"
    caddr, saddr = f"10.111.{i}.1", f"10.111.{i}.2"
    veth_pair((CLIENT, cif, caddr), (SERVER, sif, saddr))
    for host, dev in ((SERVER, sif), (CLIENT, cif)):  # download and upload shaped alike
        ns(host, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "10kb",
           "limit", "30kb")  # fmt: skip
    policy_route(CLIENT, i, cif, caddr, "10.111.0.0/16")


@pytest.fixture(scope="module")
def rig() -> Iterator[None]:
    """The two namespaces and three paths; removed (with all they hold) after."""
    sysctls = ("net.ipv4.tcp_rmem=4096 100000 100000", "net.ipv4.tcp_congestion_control=reno")
    with mptcp_hosts(CLIENT, SERVER, sysctls=sysctls):
        for i, rate in enumerate(RATES, start=1):
            _path_up(i, rate)
        yield


def received(port: int) -> dict[str, int]:
    """Bytes received per local address by the data connection's subflows (ss)."""
    _, subs = rbpm_ss.connection(rbpm_ss.parse_ss(ns(CLIENT, "ss", "-tinHMm", f"dport = :{port}")))
    return {s.addr: int(s.info.get("bytes_received", "0")) for s in subs}


def endpoints() -> dict[str, tuple[int, bool]]:
    return rbpm_ss.parse_endpoints(ns(CLIENT, "ip", "mptcp", "endpoint", "show"))


class Download:
    """iperf3 -R over MPTCP: the server sends for `seconds`; `.bps` is the receiver's rate,
    `.late_bps` its rate over the last 3 s. With upload=True the client sends instead."""

    def __init__(self, seconds: int, upload: bool = False) -> None:
        self.port = next(PORTS)
        wrap = ["mptcpize", "run", "iperf3"]
        srv = ["ip", "netns", "exec", SERVER, *wrap, "-s", "-1", "-p", str(self.port)]
        self.server = subprocess.Popen(srv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(SERVER, self.port, self.server)
        cli = ["ip", "netns", "exec", CLIENT, *wrap, "-c", SERVER_ADDR, "-B", "10.111.1.1"]
        cli += ["-p", str(self.port), "-J", "-t", str(seconds), *([] if upload else ["-R"])]
        self.client = subprocess.Popen(cli, stdout=subprocess.PIPE, text=True)
        self.bps = self.late_bps = 0.0
        self.seconds: list[float] = []  # the receiver's Mbit/s, second by second
        self.load = HostLoad()  # the machine's CPU over the transfer, for failure messages

    def wait(self) -> None:
        out, _ = self.client.communicate(timeout=60)
        self.load.stop()
        self.server.wait(timeout=10)
        result = json.loads(out)
        self.bps = result["end"]["sum_received"]["bits_per_second"]
        rates = [i["sum"]["bits_per_second"] for i in result["intervals"]]
        self.seconds = [round(r / 1e6, 1) for r in rates]
        self.late_bps = sum(rates[-3:]) / len(rates[-3:])


@pytest.mark.parametrize("eid", [1, 2], ids=["initial-subflow", "joined-subflow"])
def test_backup_endpoint_moves_the_data_off_its_subflow(rig: None, eid: int) -> None:
    addr = f"10.111.{eid}.1"
    d = Download(6)
    try:
        time.sleep(2.5)
        ns(CLIENT, "ip", "mptcp", "endpoint", "change", "id", str(eid), "backup")
        time.sleep(1.0)  # data already queued on the subflow drains
        before = received(d.port)
        time.sleep(2.0)
        after = received(d.port)
    finally:
        ns(CLIENT, "ip", "mptcp", "endpoint", "change", "id", str(eid), "nobackup")
        d.wait()
    grown = {a: after[a] - before[a] for a in after}
    # the marked subflow carries nothing; both others carry data (slowly: the 256 kbit/s
    # path's queue blocks the 100 kB buffer)
    assert {a: v > 10_000 for a, v in grown.items() if a != addr} == {
        a: True for a in ("10.111.1.1", "10.111.2.1", "10.111.3.1") if a != addr
    }, grown
    assert grown[addr] == 0, grown


def controlled_download(
    seconds: int, log: Path, role: str = "receiver"
) -> tuple[Download, subprocess.Popen[str]]:
    d = Download(seconds, upload=role == "sender")
    args = ["--port", str(d.port), "--log", str(log), "--role", role]
    ctl = ["ip", "netns", "exec", CLIENT, sys.executable, "-I", "-c", rbpm_run.source(), *args]
    return d, subprocess.Popen(ctl, text=True)


Runs = tuple[list[Download], list[Download], list[dict[str, Any]]]


def compare(role: str, rounds: int = 1) -> Runs:
    """`rounds` pairs of 10 s transfers, without RBPM then with it: (the plain transfers,
    the controlled ones, the first controlled one's log). One plain transfer is not a
    baseline: whether the slow path blocks the buffer varies from run to run."""
    plains: list[Download] = []
    controlled: list[Download] = []
    logs: list[list[dict[str, Any]]] = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="h11rbpm-") as tmp:
            plain = Download(10, upload=role == "sender")
            plain.wait()
            d, ctl = controlled_download(10, Path(tmp) / "rbpm.jsonl", role)
            try:
                d.wait()
            finally:
                ctl.terminate()
                assert ctl.wait(timeout=10) == 0
            lines = (Path(tmp) / "rbpm.jsonl").read_text().splitlines()
        plains.append(plain)
        controlled.append(d)
        logs.append([json.loads(line) for line in lines])
    return plains, controlled, logs[0]


@pytest.fixture(scope="module")
def runs(rig: None) -> Runs:
    return compare("receiver", rounds=3)


@pytest.fixture(scope="module")
def upload_runs(rig: None) -> Runs:
    return compare("sender")


def first_stop(log: list[dict[str, Any]], only: bool = True) -> dict[str, Any]:
    """The first step that stopped a subflow; it stopped the slow path's first (`only`: and
    no other), for the reason its logged inputs give."""
    steps = [r["decision"] for r in log if r["event"] == "step"]
    stops = [s for s in steps if s["action"] == "backup"]
    assert (log[0]["event"], log[-1]["event"], len(stops) >= 1) == ("start", "stop", True)
    first: dict[str, Any] = stops[0]
    slow = [f for f in first["subflows"] if f["addr"] == "10.111.3.1"]
    targets = first["targets"] if only else first["targets"][:1]
    assert [f["key"] for f in slow] == targets
    assert first["endpoints"][slow[0]["key"]] == 3
    # the logged inputs reproduce the logged requirement (Eq. 3), which exceeded the free buffer
    flows = [rbpm_policy.Subflow(f["key"], f["addr"], f["rtt_ms"], f["mss"], f["pkts"], f["bw_Bps"])
             for f in first["subflows"]]  # fmt: skip
    assert abs(rbpm_policy.required_bytes(flows) - first["required"]) <= 1
    assert first["required"] > first["free"]
    return first


def test_controller_stops_the_slow_path_and_says_why(runs: Runs) -> None:
    _, _, log = runs
    first = first_stop(log)
    # the next steps see the slow subflow stopped, and the kernel shows it backup (flag b)
    steps = [r["decision"] for r in log if r["event"] == "step"]
    later = steps[steps.index(first) + 5]["subflows"]
    assert [(f["active"], "b" in f["flags"]) for f in later if f["addr"] == "10.111.3.1"] == [
        (False, True)
    ]


def test_controller_raises_goodput_and_clears_its_flags(runs: Runs) -> None:
    """Once the controller has stopped the slow path, the download runs at the fast paths'
    rate, which no plain transfer reaches. Measured here, 10 s transfers: plain never above
    11.5 Mbit/s in any second after its first and 1.1-11.3 over its last 3 s (the 256 kbit/s
    path still in the 100 kB buffer's way; 14 runs), controlled 15.0-15.2 over its last 3 s
    (28 runs, each stopping the slow path once; 3 of 20 earlier pairs stopped it twice). The
    mean over the whole 10 s is not the measure: it depends on when the first stop lands
    (0-3.2 s) and how long the slow path's queue takes to drain, so controlled means spread
    over 4.7-14.8 Mbit/s (20 pairs) and an earlier check on them failed CI twice. A controller
    that does nothing (controlled transfers drawn from the plain ones) fails; the median over
    the rounds keeps one round where the controller re-enabled the slow path late from
    failing it."""
    plains, controlled, _ = runs
    late = statistics.median(d.late_bps for d in controlled)
    plain_late = statistics.median(d.late_bps for d in plains)
    # on a failure, every round second by second: a controlled rate stuck near one fast
    # path's 10 Mbit/s tells a missing subflow from a stop that came late (seen once in CI)
    rounds = {
        "plain": [(d.seconds, d.load) for d in plains],
        "controlled": [(d.seconds, d.load) for d in controlled],
    }
    assert late > 13e6 and late > 1.1 * plain_late, (plain_late, late, rounds)
    assert endpoints() == {f"10.111.{i}.1": (i, False) for i in (1, 2, 3)}


def test_sender_role_in_an_upload(upload_runs: Runs) -> None:
    """The client sends: o_i is cwnd, the free buffer the server's advertised window. The
    smoothed RTTs of the fast subflows jump between 1 and 15 ms, so a fast subflow is
    sometimes stopped too, and the upload's goodput without RBPM varied from 3.4 to 9.7
    Mbit/s here (8.5 to 9.7 with it): only the decisions are asserted."""
    _, _, log = upload_runs
    first_stop(log, only=False)
    assert endpoints() == {f"10.111.{i}.1": (i, False) for i in (1, 2, 3)}


def test_doctor_says_the_controller_can_run_here() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mprig.cli", "doctor", "--json"], capture_output=True, text=True
    ).stdout
    lines = [c for c in json.loads(out)["kernel"] if c["name"] == "RBPM controller"]
    assert lines == [
        {
            "name": "RBPM controller",
            "ok": True,
            "detail": "ss -M (MPTCP diag), ip mptcp endpoint and python3 present",
            "required": False,
        }
    ]
