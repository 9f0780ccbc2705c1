"""Run isolation on a real native rig (issue 14, part 1): one campaign whose two variants
set different knobs, run in the orders AB and BA, records the same effective settings per
variant; the rig is back at its baseline afterwards. What the kernel learned from the first
run's connections (its TCP metrics cache: RTT, reordering) is flushed before the second.

The kernel here has no sch_netem, so tbf stands in for it (mprig.run.impair.STANDIN_ENV).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mprig.campaign import plan, spec
from mprig.rig import virtual
from mprig.run import bundle
from mprig.run.impair import STANDIN_ENV

CAMPAIGN = """\
name: iso
seed: {seed}
order: shuffle
paths:
  - {{name: wifi, kind: wifi, rate_mbit: 50}}
  - {{name: cell, kind: cellular, rate_mbit: 50}}
variants:
  - {{name: a, protocol: mptcp, rmem: 60000, sysctls: {{net.ipv4.tcp_notsent_lowat: "131072"}}}}
  - {{name: b, protocol: mptcp, paths: [wifi], wmem: 70000, recovery: nopr}}
traffic: {{tool: iperf3, duration_s: 1}}
capture: {{enabled: false}}
"""


def _seed_for(order: list[str]) -> int:
    """A campaign seed whose shuffle runs the variants in `order`."""
    for seed in range(100):
        campaign = spec.parse_campaign(CAMPAIGN.format(seed=seed), "iso.yaml")
        if [r.variant.name for r in plan.expand(campaign)] == order:
            return seed
    raise AssertionError(f"no seed gives {order}")


def _run(tmp: Path, order: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the campaign in `order`; the recorded settings per variant, and the records."""
    file = tmp / f"{''.join(order)}.yaml"
    file.write_text(CAMPAIGN.format(seed=_seed_for(order)))
    out = tmp / "".join(order)
    argv = [sys.executable, "-m", "mprig.cli", "run", str(file), "--no-vm", "--rig", "iso",
            "--results", str(out), "--quiet"]  # fmt: skip
    env = {**os.environ, STANDIN_ENV: "1"}
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert p.returncode == 0, p.stderr
    results = out / "iso"
    runs = json.loads((results / "campaign.json").read_text())["plan"]
    assert [r["variant"]["name"] for r in runs] == order
    records = [bundle.read_record(results / r["run_id"]) for r in runs]
    assert [r["status"] for r in records] == ["complete", "complete"]
    return {r["variant"]["name"]: r["settings"] for r in records}, records


def test_each_run_starts_from_the_baseline(tmp_path: Path) -> None:
    (ab, ab_runs), (ba, ba_runs) = _run(tmp_path, ["a", "b"]), _run(tmp_path, ["b", "a"])
    assert ab == ba
    for first, second in (ab_runs, ba_runs):  # the kernel's memory of the run before
        for host in ("client", "server"):
            assert first["hosts"][host]["flushed"]["tcp_metrics_left"] == 0, first["hosts"]
            assert second["hosts"][host]["flushed"]["tcp_metrics"] >= 1, second["hosts"]
            assert second["hosts"][host]["flushed"]["tcp_metrics_left"] == 0, second["hosts"]
    client = {v: ab[v]["client"]["sysctls"] for v in "ab"}
    # a's buffers and lowat do not reach b, b's NoPR preset does not reach a
    assert client["a"]["net.ipv4.tcp_rmem"] == "4096 60000 60000"
    assert client["b"]["net.ipv4.tcp_rmem"] != "4096 60000 60000"
    assert client["b"]["net.ipv4.tcp_wmem"] == "4096 16384 70000"
    assert client["a"]["net.ipv4.tcp_wmem"] != "4096 16384 70000"
    assert client["a"]["net.ipv4.tcp_notsent_lowat"] != client["b"]["net.ipv4.tcp_notsent_lowat"]
    assert (client["a"]["net.ipv4.tcp_frto"], client["b"]["net.ipv4.tcp_frto"]) == ("2", "0")
    assert len(ab["a"]["client"]["endpoints"]) == 2
    assert len(ab["b"]["client"]["endpoints"]) == 1
    assert virtual.leftovers("iso") == []
