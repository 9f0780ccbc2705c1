"""Kill -9 anywhere (issue 14, part 7): `mprig run` of a small native campaign is killed
with SIGKILL at 20 random moments and resumed each time. After every kill no bundle says
complete unless its sha256 match; a bundle once complete is never redone (its run.json
unchanged to the byte); at the end every planned run is complete (none lost), and every run
of a variant recorded the same settings (the rig's baseline survived the kills), and the
machine-wide list of allowed congestion controls is as it was before (mprig.stack.cc_allowed
undoes what a killed campaign added).

The kernel here has no sch_netem, so tbf stands in for it (mprig.run.impair.STANDIN_ENV). The
figures of the last run of this test are in docs/running.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mprig.campaign import spec
from mprig.rig import virtual
from mprig.run import bundle
from mprig.run.impair import STANDIN_ENV
from mprig.stack import cc_allowed

pytestmark = pytest.mark.slow

KILLS = 20
RIG = "kill9"
CAMPAIGN = """\
name: k{round}
paths:
  - {{name: wifi, kind: wifi, rate_mbit: 50}}
  - {{name: cell, kind: cellular, rate_mbit: 50}}
variants:
  - {{name: a, protocol: mptcp, rmem: 60000}}
  - {{name: b, protocol: mptcp, paths: [wifi], wmem: 70000}}
repetitions: {reps}
traffic: {{tool: iperf3, duration_s: 1}}
capture: {{snaplen: 200}}
"""


def _argv(file: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "mprig.cli", "run", str(file), "--no-vm", "--rig", RIG,
            "--results", str(out), "--quiet"]  # fmt: skip


def _bundles(results: Path) -> dict[str, str]:
    """run id -> sha256 of run.json, for every bundle that says complete; AssertionError
    for one that says complete and does not verify."""
    out = {}
    for d in sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            record = bundle.read_record(d)
        except (OSError, ValueError):
            continue
        if record.get("status") == "complete":
            verdict = bundle.verify(d)
            assert verdict.ok, f"{d.name} says complete but {verdict.reason}"
            out[d.name] = hashlib.sha256((d / "run.json").read_bytes()).hexdigest()
    return out


def _last_event(results: Path, since: float) -> str:
    """Where the kill landed: the last event the killed invocation wrote."""
    try:
        lines = (results / "events.jsonl").read_text().splitlines()
    except OSError:
        lines = []
    mine = [e for e in map(json.loads, lines) if e["time"] >= since]
    return mine[-1]["event"] if mine else "before its first event"


REPS = 12  # 24 runs of about 1.5 s each per round


def _kill_at(rng: random.Random, argv: list[str], env: dict[str, str]) -> float | None:
    """Start `mprig run`, SIGKILL it after a random 0.2-5 s (None: it ended first)."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    at = rng.uniform(0.2, 5.0)
    try:
        p.wait(timeout=at)
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        return at
    assert p.returncode == 0
    return None


def _round(rnd: int, tmp: Path, rng: random.Random, kills: list[Any]) -> dict[str, str]:
    """One campaign killed until KILLS kills are done or it completes, then finished."""
    text = CAMPAIGN.format(round=rnd, reps=REPS)
    file = tmp / f"k{rnd}.yaml"
    file.write_text(text)
    # the rig up once (it takes longest): the kills land in the runner, each rerun reuses it
    virtual.up(RIG, spec.parse_campaign(text).paths)
    argv, env = _argv(file, tmp / "out"), {**os.environ, STANDIN_ENV: "1"}
    results = tmp / "out" / f"k{rnd}"
    complete: dict[str, str] = {}
    while len(kills) < KILLS:
        t0 = time.time()
        at = _kill_at(rng, argv, env)
        now = _bundles(results) if results.exists() else {}
        assert {k: now.get(k) for k in complete} == complete, "a complete run was redone"
        complete = now
        if at is None:
            break
        kills.append({"round": rnd, "after_s": round(at, 2), "last_event": _last_event(results, t0),
                      "complete": len(complete)})  # fmt: skip
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr
    final = _bundles(results)
    assert {k: final.get(k) for k in complete} == complete, "a complete run was redone"
    planned = json.loads((results / "campaign.json").read_text())["plan"]
    assert sorted(final) == sorted(r["run_id"] for r in planned), "a run was lost"
    return final


def test_kill9_at_random_moments_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random(14)
    kills: list[dict[str, Any]] = []
    settings: dict[str, list[Any]] = {}
    rnd = 0
    allowed = cc_allowed.ALLOWED_CC.read_text()
    try:
        while len(kills) < KILLS:
            rnd += 1
            for run_id in _round(rnd, tmp_path, rng, kills):
                record = bundle.read_record(tmp_path / "out" / f"k{rnd}" / run_id)
                settings.setdefault(record["variant"]["name"], []).append(record["settings"])
    finally:
        virtual.down(RIG)
    for variant, seen in settings.items():
        assert all(s == seen[0] for s in seen), f"variant {variant}: settings differ between runs"
    assert virtual.leftovers(RIG) == []
    assert cc_allowed.ALLOWED_CC.read_text() == allowed, "a killed campaign's CC stayed allowed"
    runs = sum(len(v) for v in settings.values())
    print(json.dumps({"kills": kills, "rounds": rnd, "runs": runs}))
