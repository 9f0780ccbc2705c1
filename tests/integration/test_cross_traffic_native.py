"""Cross traffic and a shared bottleneck, measured (prefix h4): `mprig run --no-vm` of two
small campaigns on the virtual rig, then `mprig collect`.

1. A TCP flow alone on a 10 Mbit/s path against the same flow with one competing TCP flow
   on its path: the competitor takes a real share, and the two flows fill the link. A UDP
   flow on a third path sends 4 Mbit/s one second in two and is measured at about 2 Mbit/s.
2. Two paths converging on one 10 Mbit/s bottleneck (50 packets of queue), a competing
   reno flow on one of them: uncoupled MPTCP (reno on each subflow) takes clearly more than
   the competitor, coupled MPTCP (LIA, the BPF program) about as much (RFC 6356's goal).

The host has no sch_netem, so tbf stands in (MPRIG_BENCH_TBF_FOR_NETEM=1, as bench/overhead
does): rates and queues hold, delays are zero. LIA loads on the host's kernel as in
test_bpfcc_native.py.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mprig.rig import virtual
from mprig.run.impair import STANDIN_ENV

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, BPF)"),
    pytest.mark.slow,  # about 5 minutes: 12 runs of 12 to 25 s
]

RIG = "h4cross"
ONE_PATH = """\
name: h4one
paths:
  - {name: alone, kind: wired, rate_mbit: 10}
  - name: shared
    kind: wired
    rate_mbit: 10
    cross_traffic: [{kind: tcp, cc: cubic}]
  - name: udp
    kind: wired
    rate_mbit: 10
    cross_traffic: [{kind: udp, rate_mbit: 4, on_s: 1, off_s: 1}]
variants:
  - {name: alone, protocol: tcp, path: alone}
  - {name: shared, protocol: tcp, path: shared}
traffic: {duration_s: 12}
capture: {enabled: false}
"""
SHARED = """\
name: h4shared
paths:
  - name: wifi
    kind: wired
    rate_mbit: 20
    cross_traffic: [{kind: tcp, cc: reno}]
  - {name: cell, kind: wired, rate_mbit: 20}
shared_bottleneck: {paths: [wifi, cell], rate_mbit: 10, limit_pkts: 50}
variants:
  - {name: uncoupled, cc: reno}
  - {name: coupled, cc: lia}
traffic: {duration_s: 25}
capture: {enabled: false}
repetitions: 5
"""


def mprig(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, STANDIN_ENV: "1"}
    argv = [sys.executable, "-m", "mprig.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)  # fmt: skip


def run_campaign(
    tmp_path: Path, text: str, timeout: float
) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Run and collect a campaign: every run.json (plan order) and runs.parquet."""
    spec = tmp_path / "c.yaml"
    spec.write_text(text)
    p = mprig("run", str(spec), "--no-vm", "--rig", RIG, "--results", str(tmp_path),
              "--quiet", timeout=timeout)  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert virtual.leftovers(RIG) == []
    name = text.split("\n", 1)[0].removeprefix("name: ")
    results = tmp_path / name
    plan = json.loads((results / "campaign.json").read_text())["plan"]
    records = [json.loads((results / r["run_id"] / "run.json").read_text()) for r in plan]
    c = mprig("collect", str(results), timeout=120)
    problems = [x for x in c.stderr.splitlines() if not x.startswith("[")]
    assert all("client.pcap: missing" in x or "artifact problem" in x for x in problems), c.stderr
    return records, pd.read_parquet(results / "runs.parquet").set_index("run_id")


def test_a_competing_tcp_flow_takes_a_real_share(tmp_path: Path) -> None:
    records, runs = run_campaign(tmp_path, ONE_PATH, timeout=120)
    assert [(r["status"], r["variant"]["name"]) for r in records] == [
        ("complete", "alone"), ("complete", "shared")]  # fmt: skip
    share = {r["variant"]["name"]: r["summary"]["throughput_bps"] / 10e6 for r in records}
    tcp = records[1]["cross_traffic"]["flows"]["shared.1"]["throughput_bps"] / 10e6
    print(f"share of the 10 Mbit/s path: {share}, the competitor's: {tcp:.3f}")
    assert share["alone"] > 0.85, share
    # Two cubic flows on one drop-tail queue for 12 s are not fair run by run. Measured
    # here, 12 runs of the shared variant: the flow got 0.38-0.75 of the link, the
    # competitor 0.21-0.58, together 0.958-0.967 (3 of 12 runs at 0.72-0.75 / 0.21-0.24, so
    # "0.35-0.65 each" failed a quarter of the time). What must hold: the competitor takes a
    # real share (without it the flow gets 0.96 and the competitor 0) and the two fill the
    # link between them (the competitor's throughput is measured, not inferred).
    assert share["shared"] <= 0.85 and tcp >= 0.1, (share, tcp)
    assert 0.9 <= share["shared"] + tcp <= 1.02, (share, tcp)
    for r in records:
        cross = r["cross_traffic"]
        flows = cross["flows"]
        assert (flows["shared.1"]["cc"], flows["udp.1"]["cc"]) == ("cubic", "")
        # on-off: 4 Mbit/s half of the time, the queue never full
        assert 1.6e6 < flows["udp.1"]["throughput_bps"] < 2.4e6, flows
        row = runs.loc[r["run_id"]]
        assert row["cross_bps.shared.1"] == pytest.approx(flows["shared.1"]["throughput_bps"])
    alone, shared = (r["cross_traffic"] for r in records)
    assert (alone["competing"], alone["jain_index"]) == ([], None)  # other paths' flows
    assert shared["competing"] == ["shared.1"]
    assert runs["jain_index"].isna().tolist() == [True, False]
    assert runs["jain_index"].iloc[1] == pytest.approx(shared["jain_index"])
    print(f"Jain's index, TCP against TCP on one path: {shared['jain_index']:.3f}")


def test_coupled_mptcp_leaves_a_shared_bottleneck_fair(tmp_path: Path) -> None:
    records, runs = run_campaign(tmp_path, SHARED, timeout=800)
    assert {r["status"] for r in records} == {"complete"}
    by: dict[str, list[dict[str, Any]]] = {"uncoupled": [], "coupled": []}
    for r in records:
        by[r["variant"]["name"]].append(r["cross_traffic"])
        assert r["shared_bottleneck"]["rate_mbit"] == 10
        assert r["cross_traffic"]["flows"]["wifi.1"]["cc"] == "reno"
    share = {v: [c["main_share"] for c in cs] for v, cs in by.items()}
    jain = {v: [c["jain_index"] for c in cs] for v, cs in by.items()}
    total = {v: [c["main_bps"] + c["flows"]["wifi.1"]["throughput_bps"] for c in cs]
             for v, cs in by.items()}  # fmt: skip
    print(f"MPTCP share: {share}\nJain's index: {jain}\nbottleneck total bits/s: {total}")
    assert all(8.5e6 < t < 10.5e6 for ts in total.values() for t in ts), total  # one 10 Mbit/s link
    mean = {v: statistics.mean(s) for v, s in share.items()}
    # Measured here, 14 runs each: uncoupled 0.54-0.70 of the bottleneck (mean 0.63; two reno
    # subflows against one reno flow), LIA 0.23-0.63 (mean 0.50, the fair share). With three
    # runs each, "uncoupled's mean exceeds LIA's by 0.07" failed CI (0.62 against 0.58) and
    # would fail 14 % of the time (resampling the 28 runs). With five runs each these bounds
    # fail 0.7 % of the time, and a coupled CC that behaved like reno would pass 0.5 %.
    assert mean["uncoupled"] > 0.55 and mean["coupled"] < 0.58, mean
    assert list(runs["jain_index"].notna()) == [True] * 10
    for r in records:  # the shared queue read back: tbf at 10 Mbit/s, before and after
        text = (tmp_path / "h4shared" / r["run_id"] / "tc-bottleneck.txt").read_text()
        marks = [line.split()[1] for line in text.splitlines() if line.startswith("# ")]
        assert (marks, text.count("qdisc tbf"), "rate 10Mbit" in text) == (
            ["before", "after"],
            4,
            True,
        )


def test_a_bottleneck_left_by_a_killed_run_is_cleared_first() -> None:
    """The set-up starts with bottleneck.CLEAN: IFBs and clsact a run killed with -9 left on
    a reused rig would make `ip link add` fail."""
    from mprig.run import bottleneck

    ns = f"{RIG}-clean"

    def sh(*argv: str) -> str:
        done = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True,
                              text=True, check=True, timeout=10)  # fmt: skip
        return done.stdout

    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=10)
    try:
        sh("ip", "link", "add", "p1", "type", "veth", "peer", "name", "p1peer")
        sh("ip", "link", "add", bottleneck.DOWN_DEV, "type", "ifb")
        sh("tc", "qdisc", "add", "dev", "p1", "clsact")
        left = sh("ip", "-o", "link", "show") + sh("tc", "qdisc", "show", "dev", "p1")
        assert (bottleneck.DOWN_DEV in left, "clsact" in left) == (True, True)
        sh("bash", "-c", bottleneck.CLEAN, "x", bottleneck.DOWN_DEV, bottleneck.UP_DEV, "p1")
        left = sh("ip", "-o", "link", "show") + sh("tc", "qdisc", "show", "dev", "p1")
        assert (bottleneck.DOWN_DEV in left, "clsact" in left) == (False, False)
    finally:
        subprocess.run(["ip", "netns", "delete", ns], check=False, timeout=10)
