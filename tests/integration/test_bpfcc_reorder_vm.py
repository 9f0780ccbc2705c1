"""prr and door under real reordering, in the VM rig (issue 7, part 4): netem on Debian's
6.1 kernel sends REORDER_PCT of the packets on the data direction at once, ahead of the
delayed ones, and the sender's ss samples (cwnd, ssthresh) and iperf3's received rate show
each algorithm's defining property on a real MPTCP transfer.

- PR-R on the papers' NoPR base (no SACK, no timestamps, dupthresh 3): Reno halves its
  window on every third duplicate ACK that reordering causes; prr keeps it.
- TCP-DOOR needs Linux to see the reordering: on the NoPR base with SACK on (no D-SACK, no
  timestamp undo, dupthresh fixed at 3) Linux counts each hole that original segments fill
  (tp->reord_seen), yet Reno still enters fast recovery on three SACKed segments and halves.
  door does not reduce within one RTT of a detected reordering, and undoes a reduction the
  detection proves spurious, so its ssthresh drops less often and its window stays up.

One VM boot for the module (about 3 minutes: the two programs compile under emulation)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from vmcampaign import campaign_in_vm

from collectors.ss import data_subflows, parse_ss

pytestmark = [pytest.mark.vm, pytest.mark.shared_vm, pytest.mark.slow]

REORDER_PCT = 25
SACK = "{net.ipv4.tcp_sack: 1}"
CAMPAIGN = f"""\
name: reorder
paths:
  - {{name: wire, kind: wired, rate_mbit: 10, delay_ms: 20, limit_pkts: 60,
      down: {{reorder_pct: {REORDER_PCT}}}}}
variants:
  - {{name: reno, protocol: mptcp, recovery: nopr, cc: reno}}
  - {{name: prr, protocol: mptcp, recovery: prr, cc: prr}}
  - {{name: reno_sack, protocol: mptcp, recovery: nopr, cc: reno, sysctls: {SACK}}}
  - {{name: door_sack, protocol: mptcp, recovery: tcpdoor, cc: tcpdoor}}  # preset: SACK on
traffic: {{tool: iperf3, direction: download, duration_s: 10}}
capture: {{hosts: [client]}}
"""


@dataclass(frozen=True)
class Run:
    """A run's sender-side figures over the data subflow's ss samples: mean cwnd and median
    ssthresh (segments), how many times ssthresh fell from one sample to the next; and
    iperf3's received rate. The mean, not the median, of cwnd: under this much reordering
    prr spends most samples inside fast recovery, where Linux's PRR paces cwnd down toward
    the data in flight before returning it to ssthresh, the window prr keeps."""

    status: str
    samples: int
    cwnd: float
    ssthresh: float
    reductions: int
    mbit: float


@pytest.fixture(scope="module")
def results() -> Iterator[dict[str, Run]]:
    with campaign_in_vm(CAMPAIGN, "reorder", rig="h13ro", timeout=900) as out:
        runs = {name: run for name, run in map(summary, sorted(out.glob("*/run.json")))}
    print(f"\nreordering {REORDER_PCT}%:", runs)  # the measured values, for docs/bpf.md
    yield runs


def summary(record: Path) -> tuple[str, Run]:
    """(variant name, its figures) from one run bundle."""
    run = json.loads(record.read_text())
    rows = data_subflows(parse_ss((record.parent / "ss-server.txt").read_text()))
    ssthresh = [int(v) for v in rows["ssthresh"].dropna()]
    received = json.loads((record.parent / "iperf3-client.json").read_text())["end"]
    return run["variant"]["name"], Run(
        status=run["status"],
        samples=len(rows),
        cwnd=float(rows["cwnd"].mean()),
        ssthresh=float(rows["ssthresh"].median()),
        reductions=sum(b < a for a, b in pairwise(ssthresh)),
        mbit=received["sum_received"]["bits_per_second"] / 1e6,
    )


def test_every_run_completed(results: dict[str, Run]) -> None:
    assert {name: run.status for name, run in results.items()} == dict.fromkeys(
        ("reno", "prr", "reno_sack", "door_sack"), "complete"
    )
    assert min(run.samples for run in results.values()) >= 15, results


def test_prr_keeps_the_window_reno_halves_under_reordering(results: dict[str, Run]) -> None:
    prr, reno = results["prr"], results["reno"]
    assert prr.cwnd > 1.4 * reno.cwnd, (prr, reno)
    assert prr.ssthresh > 3 * reno.ssthresh, (prr, reno)
    assert prr.mbit > 1.6 * reno.mbit, (prr, reno)
    assert prr.reductions < reno.reductions, (prr, reno)


def test_door_does_not_reduce_after_detected_reordering(results: dict[str, Run]) -> None:
    door, reno = results["door_sack"], results["reno_sack"]
    assert door.cwnd > 1.6 * reno.cwnd, (door, reno)
    assert door.ssthresh > 2 * reno.ssthresh, (door, reno)
    assert door.mbit > 1.6 * reno.mbit, (door, reno)
    assert door.reductions < reno.reductions, (door, reno)
