"""The BPF congestion controls in the VM rig (issue 7, part 4): Debian's stock 6.1 kernel
builds and registers prr, door, lia, cwa and olia when a campaign names them, and every run's
MPTCP subflows on the sender use the variant's algorithm (from the ss samples the runner
records). One VM boot for the module (about 3 minutes: clang runs under emulation)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from vmcampaign import campaign_in_vm

from mprig.rig import vmprobe

pytestmark = [pytest.mark.vm, pytest.mark.shared_vm, pytest.mark.slow]

CAMPAIGN = """\
name: bpf
paths:
  - {name: wifi, kind: wifi, rate_mbit: 10, delay_ms: 10, loss_pct: 0.5}
  - {name: cell, kind: cellular, rate_mbit: 5, delay_ms: 40}
variants:
  - {name: mptcp_prr, protocol: mptcp, recovery: prr, cc: prr}
  - {name: mptcp_door, protocol: mptcp, recovery: tcpdoor, cc: tcpdoor}
  - {name: mptcp_lia, protocol: mptcp, cc: lia}
  - {name: mptcp_cwa, protocol: mptcp, cc: cwa}
  - {name: mptcp_olia, protocol: mptcp, cc: olia}
traffic: {tool: iperf3, direction: download, duration_s: 3}
capture: {hosts: [client]}
"""
KERNEL_NAME = {
    "mptcp_prr": "prr",
    "mptcp_door": "door",
    "mptcp_lia": "lia",
    "mptcp_cwa": "cwa",
    "mptcp_olia": "olia",
}


@pytest.fixture(scope="module")
def results() -> Iterator[Path]:
    with campaign_in_vm(CAMPAIGN, "bpf", rig="h9bpf", timeout=900) as out:
        yield out


def test_every_run_completed_on_the_stock_kernel(results: Path) -> None:
    records = [json.loads(p.read_text()) for p in sorted(results.glob("*/run.json"))]
    assert sorted((r["variant"]["name"], r["status"]) for r in records) == sorted(
        (name, "complete") for name in KERNEL_NAME
    )
    assert {r["hosts"]["server"]["kernel"] for r in records} == {
        vmprobe.find_kernel().name.removeprefix("vmlinuz-")
    }


def test_the_senders_subflows_use_the_variants_bpf_algorithm(results: Path) -> None:
    used = {}
    for record in results.glob("*/run.json"):
        name = json.loads(record.read_text())["variant"]["name"]
        ss = (record.parent / "ss-server.txt").read_text()
        # socket samples per algorithm; the first samples may still show the previous run's
        # connections closing, so the run's own algorithm is the one most samples show
        counts = {cc: ss.count(f" {cc} ") for cc in KERNEL_NAME.values()}
        used[name] = max(counts, key=lambda cc: counts[cc]) if any(counts.values()) else None
    assert used == KERNEL_NAME
