"""Where a campaign's start goes (mprig/startup.py): phases in order, from the process's
own start the first time, and the progress line."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from mprig import startup


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "_phases", {})
    monkeypatch.setattr(startup, "_last", [])


def test_phases_in_order_and_a_repeated_phase_adds_up() -> None:
    startup.begin()
    time.sleep(0.05)
    startup.mark("plan")
    startup.mark("rig up")
    time.sleep(0.05)
    startup.mark("plan")
    got = startup.phases()
    assert list(got) == ["python", "plan", "rig up"]
    assert got["plan"] >= 0.09 and got["rig up"] < got["plan"]


def test_a_second_campaign_in_one_process_starts_from_now() -> None:
    startup.begin()
    startup.mark("plan")
    time.sleep(0.05)
    startup.begin()
    startup.mark("plan")
    assert list(startup.phases()) == ["plan"]
    assert startup.phases()["plan"] < 0.05


def test_the_first_begin_counts_the_interpreter() -> None:
    """A child that sleeps before its first begin(): phase python holds that sleep."""
    code = (
        "import time; time.sleep(0.6)\n"
        "from mprig import startup; startup.begin(); print(startup.phases()['python'])"
    )
    python_s = float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True).stdout)  # fmt: skip
    assert 0.6 <= python_s < 30


def test_progress_line() -> None:
    assert startup.line({"python": 20.25, "plan": 31.0, "ansible": 48.5}) == (
        "start 99.8 s: python 20.2, plan 31.0, ansible 48.5"
    )
