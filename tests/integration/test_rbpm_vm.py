"""RBPM in the VM rig (issue 7, part 4): seed 002's case A, shortened (three 5 Mbit/s 10 ms
paths and one 1 Mbit/s 100 ms path, 100-packet queues, 200 KB receive buffer, Reno, 15 s),
on Debian's stock 6.1 kernel through the real runner, with the variants `kernel` (original
MPTCP) and `rbpm`. The controller stops the slow path p4 within seconds, p4 then carries
next to nothing, its log is in the bundle, and every endpoint is left without the backup
flag. One VM boot for the module (about 2.5 minutes under software emulation).

Measured: upstream MPTCP on 6.1 suffers much less buffer blocking than the paper's v0.89
kernel. The committed full reproduction of case A (reports/reproductions/002, n = 5, 100 s)
gives the kernel 4.90 Mbit/s and RBPM 4.73, a gain of 0.96 [0.85, 1.07]x (the paper: 4x);
the +30 % of three earlier quick runs (controller on the receiver's RTTs) did not hold. So
the goodput check here is only that stopping p4 does not stall the transfer; whether RBPM
gains is the reproduction's verdict, with its statistics.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vmcampaign import campaign_in_vm

from mprig.stack import rbpm_policy, rbpm_ss

# In `make test-long`: since RBPM reads the sender's RTTs (queueing included) it may stop a
# second subflow or re-enable p4 for a while, and on 2026-11-25 the final CI run failed the
# p4-idle claim once (it passed alone an hour earlier; 5 of 6 passed on 2026-11-26, the
# sixth being the old gain claim, now replaced). The controller's own logic stays in make
# test (test_rbpm.py, native).
pytestmark = [pytest.mark.vm, pytest.mark.shared_vm, pytest.mark.slow, pytest.mark.long]

CAMPAIGN = """\
name: rbpm
paths:
  - {name: p1, kind: wired, rate_mbit: 5, delay_ms: 10, limit_pkts: 100}
  - {name: p2, kind: wired, rate_mbit: 5, delay_ms: 10, limit_pkts: 100}
  - {name: p3, kind: wired, rate_mbit: 5, delay_ms: 10, limit_pkts: 100}
  - {name: p4, kind: wired, rate_mbit: 1, delay_ms: 100, limit_pkts: 100}
variants:
  - {name: kernel, protocol: mptcp, cc: reno, rmem: 204800}
  - {name: rbpm, protocol: mptcp, cc: reno, rmem: 204800, path_manager: rbpm}
traffic: {tool: iperf3, direction: download, duration_s: 15}
capture: {hosts: [client]}
"""


@pytest.fixture(scope="module")
def results() -> Iterator[Path]:
    with campaign_in_vm(CAMPAIGN, "rbpm", rig="h11rbpm", timeout=600) as out:
        yield out


def bundle(results: Path, variant: str) -> tuple[dict[str, Any], Path]:
    [record] = [
        (r, p.parent)
        for p in results.glob("*/run.json")
        if (r := json.loads(p.read_text()))["variant"]["name"] == variant
    ]
    return record


def p4_addr(record: dict[str, Any]) -> str:
    return str(next(link["client_addr"] for link in record["links"] if link["name"] == "p4"))


def goodput_mbit(run_dir: Path) -> float:
    end = json.loads((run_dir / "iperf3-client.json").read_text())["end"]
    return float(end["sum_received"]["bits_per_second"]) / 1e6


def test_both_runs_complete_and_only_rbpm_has_a_log(results: Path) -> None:
    kernel, kdir = bundle(results, "kernel")
    rb, rdir = bundle(results, "rbpm")
    assert (kernel["status"], rb["status"], rb["variant"]["path_manager"]) == (
        "complete", "complete", "rbpm"
    )  # fmt: skip
    assert ((kdir / "rbpm.jsonl").exists(), "rbpm.jsonl" in rb["artifacts"]) == (False, True)
    print(f"goodput kernel {goodput_mbit(kdir):.2f} Mbit/s, rbpm {goodput_mbit(rdir):.2f}")


def test_rbpm_stops_the_slow_path_early_and_keeps_it_stopped(results: Path) -> None:
    record, run_dir = bundle(results, "rbpm")
    log = [json.loads(line) for line in (run_dir / "rbpm.jsonl").read_text().splitlines()]
    assert [r["event"] for r in log if r["event"] != "step"] == ["start", "stop"]
    steps = [r for r in log if r["event"] == "step"]
    stops = [r for r in steps if r["decision"]["action"] == "backup"]
    first = stops[0]["decision"]
    slow = p4_addr(record)
    [key] = [f["key"] for f in first["subflows"] if f["addr"] == slow]
    # p4 goes first; with the sender's RTTs (queueing included) Algorithm 1 may go on to a
    # second subflow in the same step while the rest still need more than is free
    assert (first["targets"][0], first["endpoints"][key]) == (key, 4)
    # the logged inputs give the logged requirement (Eq. 3), above the free buffer
    flows = [rbpm_policy.Subflow(f["key"], f["addr"], f["rtt_ms"], f["mss"], f["pkts"], f["bw_Bps"])
             for f in first["subflows"]]  # fmt: skip
    assert abs(rbpm_policy.required_bytes(flows) - first["required"]) <= 1
    assert first["required"] > first["free"]
    # within seconds of its first step (measured: 0.3-1.1 s; under emulation one step takes
    # about 0.5 s, and the first comes once the subflows have been seen for a second)
    assert stops[0]["t"] - steps[0]["t"] < 5.0, [(r["t"], r["decision"]) for r in steps[:3]]
    # from then on p4 is stopped and the kernel shows its subflow backup
    after = [
        (f["active"], "b" in f["flags"])
        for r in steps[steps.index(stops[0]) + 5 :]
        for f in r["decision"]["subflows"]
        if f["addr"] == slow
    ]
    assert set(after) == {(False, True)}


def test_p4_falls_idle_while_the_fast_paths_carry_the_data(results: Path) -> None:
    """From the server's ss samples (the sender): bytes acked per path over the run's last
    half. p4 under 5 % of the fast paths' bytes: at its full 1 Mbit/s it would carry about
    a fifth of the 5-6 Mbit/s the fast paths deliver; the controller on the sender's RTTs
    re-enables it now and then (2026-11-26: under 1 % in one run, 2.0 % in the next, which
    failed the old 1 % bound; 6 of 6 tests passed in the run after)."""
    record, run_dir = bundle(results, "rbpm")
    samples = (run_dir / "ss-server.txt").read_text().split("# ")[1:]
    acked = [a for a in map(_acked_by_peer, samples) if len(a) == 4]  # all four subflows up
    grown = _growth(acked[len(acked) // 2 :])
    slow = p4_addr(record)
    fast = sum(v for a, v in grown.items() if a != slow)
    assert (grown[slow] < 0.05 * fast, fast > 3_000_000) == (True, True), grown


def _growth(samples: list[dict[str, int]]) -> dict[str, int]:
    """Bytes acked per address over consecutive samples. A subflow that closes and comes back
    starts a new bytes_acked counter: a value below the previous one counts from zero (the
    last-minus-first difference went negative on such a run)."""
    grown: dict[str, int] = {}
    for before, after in itertools.pairwise(samples):
        for addr, value in after.items():
            step = value - before.get(addr, 0)
            grown[addr] = grown.get(addr, 0) + (value if step < 0 else step)
    return grown


def test_growth_counts_a_restarted_subflow_from_zero() -> None:
    samples = [{"a": 100, "b": 50}, {"a": 300, "b": 20}, {"a": 400, "b": 70}]
    assert _growth(samples) == {"a": 300, "b": 70}


def _acked_by_peer(sample: str) -> dict[str, int]:
    """bytes_acked of the data connection's subflows, by the client's address."""
    _, subs = rbpm_ss.connection(rbpm_ss.parse_ss(sample.partition("\n")[2]))
    return {s.peer: int(s.info.get("bytes_acked", "0")) for s in subs}


def steady_mbit(run_dir: Path) -> float:
    """Mean goodput of seconds 5 to the end (RBPM stopped p4 after about 2 s)."""
    intervals = json.loads((run_dir / "iperf3-client.json").read_text())["intervals"]
    rates = [i["sum"]["bits_per_second"] / 1e6 for i in intervals[5:]]
    return float(sum(rates) / len(rates))


def test_stopping_p4_does_not_stall_the_transfer(results: Path) -> None:
    """Once RBPM stopped p4 the three fast paths carry the data: at least 3/4 of the
    kernel's goodput (n = 5 core runs: 0.83-1.09 of it; on 2026-11-26 this run 5.70 against
    6.31 Mbit/s). A controller that stopped the wrong subflows, or all of them, fails."""
    _, kdir = bundle(results, "kernel")
    _, rdir = bundle(results, "rbpm")
    kernel, controlled = steady_mbit(kdir), steady_mbit(rdir)
    assert controlled > 0.75 * kernel, (kernel, controlled)


def test_endpoints_are_left_without_backup_flags(results: Path) -> None:
    record, _ = bundle(results, "rbpm")
    ip = ["ip", "mptcp", "endpoint", "change"]
    changes = {tuple(c["argv"][4:]) for c in record["commands"] if c["argv"][:4] == ip}
    assert changes == {("id", str(i), "nobackup") for i in (1, 2, 3, 4)}
