"""`mprig run --stop-after DURATION` (mprig.run.stop_after): the duration as written on the
command line, the decision before each run (on a fake clock: no timing here), and what
reaches the campaign VM (its boot replaced by a recorder). The native end to end is
tests/integration/test_stop_after_native.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_merge import SPEC

from mprig.cli.main import main
from mprig.rig import vm
from mprig.run import stop_after
from mprig.run.stop_after import Budget, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90m", 5400), ("2h", 7200), ("1h30m", 5400), ("5400s", 5400), ("5400", 5400),
     ("1h0m30s", 3630), ("0.5s", 0.5), (" 10m ", 600)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "2d", "90 m", "1m2h", "-5m", "0", "0h0m", "h1"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"90m|above 0"):
        parse_duration(text)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(duration_s: float) -> Any:
    return SimpleNamespace(traffic=SimpleNamespace(duration_s=duration_s))


def test_a_run_starts_only_when_it_is_expected_to_end_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(stop_after.time, "monotonic", clock)
    budget = Budget(300.0)
    # before any run is timed: its traffic plus FIRST_GUESS_S
    assert budget.expected(run(60)) == 60 + stop_after.FIRST_GUESS_S
    clock.now += 300 - 75
    assert budget.room_for(run(60))  # 225 + 75 = 300: just fits
    clock.now += 0.5
    assert not budget.room_for(run(60))
    # once runs are timed, the longest of them (a retried run included) is the guess
    budget = Budget(300.0)
    budget.timed(66.0)
    budget.timed(130.0)
    budget.timed(70.0)
    assert budget.expected(run(60)) == 130.0
    clock.now += 170
    assert budget.room_for(run(60)) and (clock.now - budget.start) == 170
    clock.now += 1
    assert not budget.room_for(run(60))
    failed_fast = Budget(300.0)
    failed_fast.timed(2.0)  # a run that failed in its first seconds
    assert failed_fast.expected(run(60)) == 60 and failed_fast.expected(run(1)) == 2.0
    message = budget.stop_message(run(60), 7)
    assert "7 runs left" in message and "0h02m51s spent" in message and "130 s" in message


def test_inside_the_vm_the_budget_counts_from_the_boot(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(stop_after.time, "monotonic", clock)
    monkeypatch.setattr(stop_after, "Path", lambda _: SimpleNamespace(read_text=lambda: "41.5 3.0"))
    assert stop_after.since_boot() == 1000.0 - 41.5


@pytest.fixture
def booted(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    seen: list[list[str]] = []

    def record(argv: list[str], rwdirs: list[Path], **_: Any) -> int:
        seen.append(argv)
        return 3  # the guest stopped with runs left

    monkeypatch.setattr(vm, "run_in_vm", record)
    monkeypatch.setenv("MPRIG_VNG", "/usr/bin/vng")
    return seen


def test_the_vm_gets_what_is_left_and_its_exit_status_is_kept(
    tmp_path: Path, booted: list[list[str]]
) -> None:
    spec = tmp_path / "mc.yaml"
    spec.write_text(SPEC)
    argv = ["run", str(spec), "--vm", "--quiet", "--results", str(tmp_path / "r")]
    assert main([*argv, "--stop-after", "2h"]) == 3
    (guest,) = booted
    sent = parse_duration(guest[guest.index("--stop-after") + 1])
    assert 7200 - 60 < sent < 7200  # what was left of the two hours when the VM started
    assert main(argv) == 3 and "--stop-after" not in booted[1]


def test_help_and_a_bad_duration(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "x.yaml", "--stop-after", "2 days"])
    assert exited.value.code == 2
    assert "write it as 90m, 2h, 1h30m or 5400s" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--stop-after DURATION" in out and "3 stopped by --stop-after" in out
