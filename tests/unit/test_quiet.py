"""tests/quiet.py: a VM test's measurement waits for the other process's running test, and
no new test starts until it is done; real flock locks, threads standing in for the two
pytest processes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from quiet import QUIET, YIELD, quiet, yielding


@pytest.fixture
def both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(QUIET, str(tmp_path))
    monkeypatch.setenv(YIELD, str(tmp_path))
    return tmp_path


def test_the_measurement_waits_for_the_running_test_and_holds_back_the_next(both: Path) -> None:
    events: list[str] = []
    running, finish_running = threading.Event(), threading.Event()
    measuring, finish_measuring = threading.Event(), threading.Event()

    def other_test(name: str, started: threading.Event, finish: threading.Event) -> None:
        with yielding():
            events.append(f"{name} starts")
            started.set()
            finish.wait(10)
            events.append(f"{name} ends")

    def measurement() -> None:
        with quiet("probe"):
            events.append("measurement starts")
            measuring.set()
            finish_measuring.wait(10)
            events.append("measurement ends")

    first = threading.Thread(target=other_test, args=("first", running, finish_running))
    first.start()
    assert running.wait(10)
    vm = threading.Thread(target=measurement)
    vm.start()
    assert not measuring.wait(0.5)  # the first test still runs
    second_started, done = threading.Event(), threading.Event()
    done.set()
    second = threading.Thread(target=other_test, args=("second", second_started, done))
    second.start()
    assert not second_started.wait(0.5)  # held back although the measurement has not begun
    finish_running.set()
    assert measuring.wait(10)
    assert not second_started.wait(0.5)  # still held back while the measurement runs
    finish_measuring.set()
    assert second_started.wait(10)
    for t in (first, vm, second):
        t.join(10)
    assert events == [
        "first starts", "first ends", "measurement starts", "measurement ends", "second starts",
        "second ends",
    ]  # fmt: skip
    assert (both / "quiet.log").read_text().startswith("probe: ")


def test_other_tests_run_side_by_side(both: Path) -> None:
    with yielding(), yielding():  # shared: two at once do not wait for each other
        pass


def test_no_op_without_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(QUIET, raising=False)
    monkeypatch.delenv(YIELD, raising=False)
    with yielding(), quiet("alone"), yielding():  # would deadlock if the locks were taken
        pass
    assert list(tmp_path.iterdir()) == []
