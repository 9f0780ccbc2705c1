"""Issue 19 part 5, measured: the nightly judged on nights simulated from recorded runs
(bench/nightly_sim.py; tests/captures/test_nightly_sim/recorded_runs.csv, 22 runs of the
smoke campaign's MPTCP and TCP-over-Wi-Fi variants on three nights of one commit). On 30
nights of unchanged code at most one false alarm in total; a real 15 % throughput drop
found on at least 90 % of nights. `pytest -s` prints the measured figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench import nightly_sim as ns
from mprig.errors import UsageError


@pytest.fixture(scope="module")
def recorded() -> object:
    return ns.load_recorded()


def test_recorded_runs_are_three_nights_of_both_variants(recorded: object) -> None:
    frame = recorded
    got = frame.groupby(["night", "variant"]).size().to_dict()  # type: ignore[attr-defined]
    assert got == {(0, "mptcp"): 2, (0, "tcp_wifi"): 2, (1, "mptcp"): 2, (1, "tcp_wifi"): 2,
                   (2, "mptcp"): 10}  # fmt: skip


def test_simulated_night_keeps_the_recorded_spread(recorded: object) -> None:
    runs = ns.simulate(recorded, 400, np.random.default_rng(1))  # type: ignore[arg-type]
    mptcp = runs[runs["variant"] == "mptcp"]
    cv = float(mptcp["throughput_bps"].std() / mptcp["throughput_bps"].mean())
    assert 0.005 < cv < 0.03  # recorded: 1.0 % within a night
    assert runs[runs["variant"] == "tcp_wifi"]["ooo_ratio"].isna().all()  # TCP has none


def test_thirty_unchanged_nights_and_a_15_percent_drop(recorded: object) -> None:
    frame = recorded
    rows = ns.measure(frame, ns.CAMPAIGN_REPETITIONS, nights=1, trials=0).rows  # type: ignore[arg-type]
    reps = ns.repetitions(frame, 0.15, 0.05, rows)  # type: ignore[arg-type]
    m = ns.measure(frame, reps, nights=30, trials=60)  # type: ignore[arg-type]
    print(ns.report_line(m, 0.15))
    assert (m.false_alarms <= 1, m.power >= 0.9) == (True, True), ns.report_line(m, 0.15)


def test_bad_recorded_file_is_an_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "runs.csv"
    bad.write_text("variant,throughput_bps\nmptcp,1\n")
    with pytest.raises(UsageError, match=f"{bad}: missing columns night, repetition"):
        ns.load_recorded(bad)
