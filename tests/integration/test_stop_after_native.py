"""`mprig run --stop-after` end to end on the native virtual rig: a campaign of 1 s runs
given 25 s stops between runs with exit status 3, says how many runs are left, records the
stop in events.jsonl, and the next `mprig run` goes on with the runs left without redoing a
complete one; a budget too small for one run starts none.

The kernel here has no sch_netem, so tbf stands in for it (mprig.run.impair.STANDIN_ENV)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mprig.campaign import spec
from mprig.rig import virtual
from mprig.run.impair import STANDIN_ENV

pytestmark = pytest.mark.slow

RIG = "stopat"
RUNS = 30  # 1 s of traffic each, so never all within 25 s
CAMPAIGN = f"""\
name: stopafter
paths:
  - {{name: wifi, kind: wifi, rate_mbit: 50}}
  - {{name: cell, kind: cellular, rate_mbit: 50}}
variants:
  - {{name: a, protocol: mptcp}}
repetitions: {RUNS}
traffic: {{tool: iperf3, duration_s: 1}}
capture: {{snaplen: 200}}
"""


def mprig_run(file: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mprig.cli", "run", str(file), "--no-vm", "--rig", RIG,
            "--results", str(out), "--quiet", *extra]  # fmt: skip
    env = {**os.environ, STANDIN_ENV: "1"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)


def complete(results: Path) -> dict[str, str]:
    """run id -> sha256 of run.json, for each bundle that says complete."""
    out = {}
    for record in results.glob("*/run.json"):
        if json.loads(record.read_text()).get("status") == "complete":
            out[record.parent.name] = hashlib.sha256(record.read_bytes()).hexdigest()
    return out


def events(results: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (results / "events.jsonl").read_text().splitlines()]


def said(results: Path) -> list[str]:
    return [str(e["text"]) for e in events(results) if e["event"] == "message"]


def test_stop_after_stops_between_runs_and_the_next_run_goes_on(tmp_path: Path) -> None:
    file, out = tmp_path / "c.yaml", tmp_path / "out"
    file.write_text(CAMPAIGN)
    results = out / "stopafter"
    # the rig up once (it takes longest): each invocation reuses it
    virtual.up(RIG, spec.parse_campaign(CAMPAIGN).paths)
    try:
        p = mprig_run(file, out, "--stop-after", "25s")
        assert p.returncode == 3, p.stderr
        first = complete(results)
        assert 1 <= len(first) < RUNS
        left = RUNS - len(first)
        assert f"stopping with {left} runs left" in said(results)[-1]
        end = [e for e in events(results) if e["event"] == "campaign_end"][-1]
        assert (end["status"], end["left"], end["reason"]) == ("stopped", left, "--stop-after")

        p = mprig_run(file, out, "--stop-after", "1s")  # a 1 s run takes 1 s + FIRST_GUESS_S
        assert p.returncode == 3, p.stderr
        assert complete(results) == first and f"stopping with {left} runs left" in said(results)[-1]

        # goes on and redoes no run (checking the complete bundles took 20 s at 0.25 CPU)
        p = mprig_run(file, out, "--stop-after", "45s")
        then = complete(results)
        assert p.returncode == (0 if len(then) == RUNS else 3), p.stderr
        assert len(then) > len(first) and {k: then[k] for k in first} == first
    finally:
        virtual.down(RIG)
    assert virtual.leftovers(RIG) == []
