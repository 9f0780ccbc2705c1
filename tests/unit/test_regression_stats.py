"""Statistics behind reports and regression verdicts, on seeded synthetic samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reports import directions as dirs
from reports.compare import judge
from reports.stats import MeanCI, bootstrap_ratio, mann_whitney_p, mean_ci

TRIALS = 200
REPETITIONS = 10
THROUGHPUT_BPS = 30e6
CV = 0.05  # repetition-to-repetition spread of throughput on a quiet rig (5 %)


def flagged(scale: float, cv: float, seed: int, direction: int = dirs.HIGHER) -> int:
    """How many of TRIALS comparisons of baseline vs baseline*SCALE call a regression."""
    rng = np.random.default_rng(seed)
    count = 0
    for trial in range(TRIALS):
        base = THROUGHPUT_BPS * rng.lognormal(0, cv, REPETITIONS)
        cur = scale * THROUGHPUT_BPS * rng.lognormal(0, cv, REPETITIONS)
        ci = bootstrap_ratio(base, cur, seed=trial)
        count += judge(ci.ratio, ci.low, ci.high, direction, 0.05) == "regression"
    return count


@pytest.mark.parametrize("cv", [CV, 2 * CV])
def test_identical_distributions_rarely_flag_a_regression(cv: float) -> None:
    assert flagged(1.0, cv, seed=11) <= 0.05 * TRIALS


def test_a_15_percent_throughput_drop_is_flagged() -> None:
    assert flagged(0.85, CV, seed=12) >= 0.95 * TRIALS


def test_the_mirror_rise_of_a_lower_is_better_metric_is_flagged() -> None:
    """x 1/0.85 (+17.6 %) mirrors the 15 % drop on the log scale the ratio lives on."""
    assert flagged(1 / 0.85, CV, seed=13, direction=dirs.LOWER) >= 0.95 * TRIALS
    assert flagged(0.85, CV, seed=14, direction=dirs.LOWER) == 0  # an improvement


def test_mean_ci_uses_the_t_distribution() -> None:
    # mean 2, sd 1, n 3: half width t(0.975, 2) * 1 / sqrt(3) = 4.302653 / 1.732051
    ci = mean_ci([1.0, 2.0, 3.0])
    assert (ci.mean, ci.n) == (2.0, 3)
    assert ci.half_width == pytest.approx(2.484138, abs=1e-6)
    assert (ci.low, ci.high) == pytest.approx((2 - 2.484138, 2 + 2.484138), abs=1e-6)


def test_mean_ci_of_one_value_has_no_interval_and_nan_is_ignored() -> None:
    ci = mean_ci([5.0, math.nan])
    assert (ci.mean, ci.n, math.isnan(ci.low), math.isnan(ci.high)) == (5.0, 1, True, True)
    empty = mean_ci([])
    assert (empty.n, math.isnan(empty.mean)) == (0, True)
    assert isinstance(empty, MeanCI)


def test_bootstrap_ratio_is_seeded_and_brackets_the_ratio() -> None:
    base = np.array([10.0, 11.0, 9.0, 10.5, 9.5])
    cur = base * 0.8
    a, b = bootstrap_ratio(base, cur, seed=3), bootstrap_ratio(base, cur, seed=3)
    assert a == b
    assert a.ratio == pytest.approx(0.8)
    assert a.low <= 0.8 <= a.high


def test_bootstrap_ratio_of_zero_baseline_is_undefined() -> None:
    ci = bootstrap_ratio([0.0, 0.0, 0.0], [1.0, 2.0, 3.0])
    assert all(math.isnan(v) for v in (ci.ratio, ci.low, ci.high))


def test_mann_whitney_p() -> None:
    assert mann_whitney_p([1.0, 1.0], [1.0, 1.0]) == 1.0
    assert mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.007937, abs=1e-6)
    assert math.isnan(mann_whitney_p([], [1.0]))


@pytest.mark.parametrize(
    ("low", "high", "direction", "verdict"),
    [
        (0.80, 0.94, dirs.HIGHER, "regression"),
        (0.80, 0.96, dirs.HIGHER, "ok"),
        (1.06, 1.20, dirs.HIGHER, "improvement"),
        (1.06, 1.20, dirs.LOWER, "regression"),
        (0.80, 0.94, dirs.LOWER, "improvement"),
        (0.80, 0.94, dirs.NEUTRAL, "info"),
        (0.80, 0.94, None, "info"),
    ],
)
def test_judge_needs_the_whole_interval_beyond_the_tolerance(
    low: float, high: float, direction: int | None, verdict: str
) -> None:
    assert judge((low + high) / 2, low, high, direction, 0.05) == verdict


@pytest.mark.parametrize("reps", [3, 5])
def test_few_repetitions_detect_a_clear_drop(reps: int) -> None:
    """The nightly runs 3 repetitions: a 30 % drop must still be caught."""
    rng = np.random.default_rng(reps)
    base = THROUGHPUT_BPS * rng.lognormal(0, CV, reps)
    ci = bootstrap_ratio(base, 0.7 * THROUGHPUT_BPS * rng.lognormal(0, CV, reps), seed=1)
    assert judge(ci.ratio, ci.low, ci.high, dirs.HIGHER, 0.05) == "regression"


def test_directions_come_from_the_collectors_table() -> None:
    table = dirs.directions()
    assert [
        dirs.direction_of(m, table)
        for m in ("goodput_bps", "ooo_ratio", "link_util.wifi", "cwnd_mean.cell", "nonsense")
    ] == [dirs.HIGHER, dirs.LOWER, dirs.HIGHER, dirs.NEUTRAL, None]
