"""run_campaign's count of complete runs at the end (mprig/run/runner.py): those verified
before the start plus those committed since. It used to hash every bundle again at the end,
which read each capture back and took 4.5 minutes after 105 runs in the emulated guest.
The rig is faked here (one_attempt, sweep, baseline); bundles, hashes and commits are real."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from mprig.campaign.plan import expand
from mprig.campaign.spec import parse_campaign
from mprig.run import bundle, runner
from mprig.run.progress import Reporter
from mprig.run.run_signals import Interrupted

SPEC = """
name: tally
paths: [{name: wifi, kind: wifi, rate_mbit: 10, delay_ms: 10}]
variants: [{name: tcp, protocol: tcp, path: wifi}]
traffic: {tool: iperf3, duration_s: 5}
repetitions: 5
"""


class FakeRig:
    name, mode = "tally", "virtual"

    def close(self) -> None:
        pass


def fake_attempts(
    monkeypatch: pytest.MonkeyPatch, outcomes: dict[int, str], hashed: list[str]
) -> None:
    """Attempt n (from 1) stages a capture and ends as outcomes[n] (default complete);
    "interrupt-after-commit" commits it and then raises Interrupted, as a signal that
    arrives just after the rename would. Every sha256 taken is listed in `hashed`."""
    count = [0]

    def one_attempt(ctx: Any, run: Any, number: int) -> dict[str, Any]:
        count[0] += 1
        staging = bundle.partial_dir(ctx.results, run.run_id)
        staging.mkdir(exist_ok=True)
        (staging / "client.pcap").write_bytes(b"x" * 1000)
        status = outcomes.get(count[0], "complete")
        if status == "interrupt-after-commit":
            bundle.commit(ctx.results, run.run_id, {"status": "complete", "timings": {}})
            raise Interrupted(signal.SIGTERM)
        return {"status": status, "reason": "" if status == "complete" else "client: gone",
                "timings": {"traffic_s": 5.0}}  # fmt: skip

    real_sha = bundle.sha256_file

    def sha(path: Path) -> str:
        hashed.append(path.parent.name)
        return real_sha(path)

    monkeypatch.setattr(runner, "one_attempt", one_attempt)
    monkeypatch.setattr(bundle, "sha256_file", sha)
    for name in ("sweep_rig", "restore_baseline"):
        monkeypatch.setattr(runner, name, lambda *a, **k: None)
    monkeypatch.setattr(runner, "host_facts", lambda rig: ({}, False))
    monkeypatch.setattr(runner, "take_baseline", lambda *a, **k: None)


def campaign_and_runs() -> tuple[Any, list[Any]]:
    campaign = parse_campaign(SPEC, "tally.yaml")
    return campaign, expand(campaign)


def test_the_end_count_hashes_no_bundle_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign, runs = campaign_and_runs()
    hashed: list[str] = []
    fake_attempts(monkeypatch, {3: "failed"}, hashed)
    first = runner.run_campaign(campaign, runs[:3], FakeRig(), tmp_path, Reporter(tmp_path))  # type: ignore[arg-type]
    assert (first.complete, first.failed, first.skipped) == (2, 1, 0)
    hashed.clear()
    # the second invocation verifies the two complete ones once, at its start, and runs the rest
    second = runner.run_campaign(campaign, runs, FakeRig(), tmp_path, Reporter(tmp_path))  # type: ignore[arg-type]
    assert (second.complete, second.failed, second.skipped) == (5, 0, 2)
    assert sorted(h for h in hashed if not h.startswith(".")) == sorted(
        r.run_id for r in runs[:2]
    ), "each bundle from before is hashed once (at the start), the new ones only at commit"
    assert sum(bundle.verify(tmp_path / r.run_id).ok for r in runs) == second.complete


def test_a_run_committed_just_before_a_signal_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign, runs = campaign_and_runs()
    fake_attempts(monkeypatch, {2: "interrupt-after-commit"}, [])
    result = runner.run_campaign(campaign, runs, FakeRig(), tmp_path, Reporter(tmp_path))  # type: ignore[arg-type]
    assert result.interrupted == signal.SIGTERM
    assert result.complete == 2 == sum(bundle.verify(tmp_path / r.run_id).ok for r in runs)
