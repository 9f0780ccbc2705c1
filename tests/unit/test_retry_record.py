"""A run whose attempt failed and was retried records why (run.json `earlier_attempts`): at
100 m in 003-scenario1-full 4 of 17 first attempts hung past iperf3's timeout and were run
again, and run.json said only `attempts: 2`, so nobody could tell a hang from a lost SSH
connection afterwards. The attempts are faked; the loop and the commit are the runner's."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from test_hashed_staging import SPEC, FakeRig

from mprig.campaign.plan import expand
from mprig.campaign.spec import parse_campaign
from mprig.run import bundle, runner


class Reporter:
    def __init__(self) -> None:
        self.retries: list[tuple[str, int, str]] = []

    def retry(self, run_id: str, attempt: int, reason: str) -> None:
        self.retries.append((run_id, attempt, reason))


def execute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outcomes: list[Any], spec: str = SPEC
) -> dict[str, Any]:
    """run.json of one run whose attempts end as OUTCOMES say: a reason that is transient
    (retried), ("fatal", reason) that is not, or None for complete."""
    run = expand(parse_campaign(spec, "retried.yaml"))[0]

    def one_attempt(ctx: Any, run: Any, number: int) -> dict[str, Any]:
        staging = bundle.partial_dir(ctx.results, run.run_id)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        outcome = outcomes[number - 1]
        record: dict[str, Any] = {"status": "complete", "reason": "", "_transient": False,
                                  "timings": {"traffic_s": 5.0}}  # fmt: skip
        if outcome is not None:
            fatal = isinstance(outcome, tuple)
            reason = outcome[1] if fatal else outcome
            record.update(status="failed", reason=reason, _transient=not fatal)
        return record

    monkeypatch.setattr(runner, "one_attempt", one_attempt)
    ctx = runner.Context(None, FakeRig(), tmp_path, Reporter())  # type: ignore[arg-type]
    runner.execute(ctx, run)
    return bundle.read_record(tmp_path / run.run_id)


HUNG = "traffic: iperf3 still running 65 s after its 50 s test (timed out)"
SSH = "client: ssh: connection reset"


def test_a_retried_run_records_why_each_earlier_attempt_was_discarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = execute(tmp_path, monkeypatch, [HUNG, SSH, None])
    assert (record["status"], record["attempts"]) == ("complete", 3)
    assert record["earlier_attempts"] == [
        {"attempt": 1, "reason": HUNG},
        {"attempt": 2, "reason": SSH},
    ]


def test_a_run_that_gave_up_records_the_attempts_before_its_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = execute(tmp_path, monkeypatch, [HUNG, HUNG, SSH])
    assert (record["status"], record["attempts"]) == ("failed", 3)
    assert record["reason"] == f"{SSH} (gave up after 3 attempts)"
    assert [e["attempt"] for e in record["earlier_attempts"]] == [1, 2]


def test_a_first_attempt_that_ends_the_run_records_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "earlier_attempts" not in execute(tmp_path, monkeypatch, [None])
    (tmp_path / "f").mkdir()
    failed = execute(tmp_path / "f", monkeypatch, [("fatal", "spec: bad")])
    assert (failed["status"], failed["attempts"]) == ("failed", 1)
    assert "earlier_attempts" not in failed


LOSSY = SPEC.replace(
    "  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}",
    "  - {name: wifi, kind: wifi, wifi_standard: 11g, distance_m: 100, channel_model: paper003,"
    " rate_mbit: 54, delay_ms: 10}",
)


@pytest.mark.parametrize(("spec", "timeout"), [(SPEC, 5 + 15.0), (LOSSY, 5 + 120.0)])
def test_run_json_records_the_traffic_timeout_the_run_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, timeout: float
) -> None:
    """A hang's reason names the limit, but a run that finished said nothing of it: the
    margin follows the paths' loss (15 s lossless, 120 s at 100 m in paper 003's model)."""
    record = execute(tmp_path, monkeypatch, [HUNG, None], spec)
    assert record["timings"]["traffic_timeout_s"] == timeout
