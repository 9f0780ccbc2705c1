"""Issue 19 part 4: a nightly that does not cry wolf. Each row is tested for a change beyond
the tolerance (one-sided Welch test against the tolerance margin) and the night's rows are
held together by Benjamini-Hochberg, so a night with no change rarely raises an alarm; the
command-line line shows the spread. The false-alarm rate is measured on synthetic nights,
before (each row's bootstrap interval on its own) and after."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import report_synth as rs

from reports import compare, compare_render, results
from reports import directions as dirs
from reports.stats import beyond_tolerance_p, bh_adjust, bootstrap_ratio

ROWS = 35  # metric rows of a nightly campaign (issue 19)
NIGHTS = 200


def test_bh_adjust_is_the_step_up_procedure() -> None:
    got = bh_adjust([0.01, 0.04, 0.03, 0.005, math.nan])
    assert got[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02]) and math.isnan(got[4])
    assert bh_adjust([]) == []


def test_beyond_tolerance_p_tests_against_the_margin() -> None:
    base, same = [10.0, 10.5, 9.5], [10.0, 10.4, 9.6]
    assert beyond_tolerance_p(base, same, 0.05, dirs.HIGHER) > 0.5
    drop = [7.0, 7.2, 6.9]  # -29 %: far beyond 5 %
    assert beyond_tolerance_p(base, drop, 0.05, dirs.HIGHER) < 0.01
    assert beyond_tolerance_p(base, drop, 0.05, dirs.LOWER) > 0.99  # an improvement there
    assert beyond_tolerance_p([0.0] * 3, [0.0] * 3, 0.05, dirs.LOWER) == 1.0
    assert beyond_tolerance_p([5.0] * 3, [4.0] * 3, 0.05, dirs.HIGHER) == 0.0


def alarm_nights(reps: int, cv: float, seed: int) -> tuple[float, float]:
    """Share of NIGHTS no-change nights of ROWS rows with at least one regression: by each
    row's bootstrap interval alone (before), and with the night's BH control (after)."""
    rng = np.random.default_rng(seed)
    before = after = 0
    for _night in range(NIGHTS):
        old, ps = 0, []
        for row in range(ROWS):
            b, c = rng.lognormal(0, cv, reps), rng.lognormal(0, cv, reps)
            ci = bootstrap_ratio(b, c, seed=row, resamples=500)
            old += compare.judge(ci.ratio, ci.low, ci.high, dirs.HIGHER, 0.05) == "regression"
            ps.append(beyond_tolerance_p(b, c, 0.05, dirs.HIGHER))
        before += old > 0
        after += any(q <= compare.FDR for q in bh_adjust(ps))
    return before / NIGHTS, after / NIGHTS


@pytest.mark.parametrize(
    ("reps", "cv", "before_at_least", "after_at_most"),
    [(3, 0.05, 0.05, 0.01), (3, 0.10, 0.30, 0.02), (2, 0.10, 0.90, 0.01)],
)
def test_no_change_nights_rarely_cry_wolf(
    reps: int, cv: float, before_at_least: float, after_at_most: float
) -> None:
    before, after = alarm_nights(reps, cv, seed=reps * 100 + int(cv * 100))
    print(f"reps {reps}, cv {cv:.0%}: false-alarm nights before {before:.1%}, after {after:.1%}")
    assert before >= before_at_least and after <= after_at_most


def test_thirty_unchanged_nights_through_compare(tmp_path: Path) -> None:
    """The issue's measure: 30 nights of unchanged code, at most one false alarm in total."""
    base = rs.Synth(repetitions=3, timeseries=False, cv=0.10)
    base = results.load(rs.write(tmp_path / "base", base))
    alarms = alone = 0
    for night in range(30):
        s = rs.Synth(repetitions=3, timeseries=False, noise=10 + night, cv=0.10)
        c = compare.compare(base, results.load(rs.write(tmp_path / f"n{night}", s)))
        alarms += bool(c.regressions)
        alone += any(
            compare.judge(r.ratio, r.low, r.high, r.direction, c.tolerance) == "regression"
            for r in c.rows
        )
    print(f"30 unchanged nights, {len(c.rows)} rows: false alarms {alone} before, {alarms} after")
    assert alarms <= 1


def test_a_15_percent_throughput_drop_is_found(tmp_path: Path) -> None:
    """Power at 10 repetitions (docs/reports.md: what a nightly that must catch 15 % needs)."""
    base = results.load(rs.write(tmp_path / "base", rs.Synth(repetitions=10, timeseries=False)))
    found = 0
    for trial in range(20):
        s = rs.Synth(
            repetitions=10, timeseries=False, noise=50 + trial, scale={"throughput_bps": 0.85}
        )
        c = compare.compare(base, results.load(rs.write(tmp_path / f"t{trial}", s)))
        found += any(r.metric == "throughput_bps" for r in c.regressions)
    print(f"15 % throughput drop, 10 repetitions: found in {found}/20")
    assert found >= 18


def test_summary_line_shows_the_spread(tmp_path: Path) -> None:
    base = results.load(rs.write(tmp_path / "b", rs.Synth(repetitions=3, timeseries=False)))
    cur = results.load(rs.write(tmp_path / "c", rs.Synth(repetitions=3, timeseries=False, noise=2)))
    c = compare.compare(base, cur)
    judged = [r for r in c.rows if r.verdict in compare.JUDGED and not math.isnan(r.ratio)]
    weak = [r for r in c.rows if r.verdict.startswith("underpowered")]
    changes = [r.change_pct for r in judged]
    widths = sorted((r.high - r.low) / 2 * 100 for r in judged)
    metrics = len({r.metric for r in c.rows})
    assert compare_render.summary_line(c) == (
        f"OK ({metrics} metrics, 0 regressions; changes {min(changes):+.1f} to "
        f"{max(changes):+.1f} %, median 95 % CI ±{np.median(widths):.1f} %; "
        f"FDR 5 % over {len(judged)} rows, {len(weak)} underpowered)"
    )
    # seeded: at n = 3 the rows whose spread resolves a 15 % change are judged, not the rest
    assert (len(judged), len(weak)) == (37, 39)
    assert all(0 <= r.q_value <= 1 for r in judged)


def test_needed_repetitions_follow_the_spread_and_the_number_of_rows() -> None:
    from reports.stats import needed_repetitions

    # 15 % drop, 5 % tolerance, 5 % spread, 35 rows at FDR 5 %, 90 % power
    assert needed_repetitions(0.05, 0.15, 0.05, rows=35) == 10
    assert needed_repetitions(0.10, 0.15, 0.05, rows=35) == 32
    assert needed_repetitions(0.05, 0.15, 0.05, rows=1) == 5
    assert needed_repetitions(0.05, 0.04, 0.05, rows=35) is None  # inside the tolerance


def test_compare_notes_the_repetitions_a_change_needs(tmp_path: Path) -> None:
    base = results.load(rs.write(tmp_path / "b", rs.Synth(repetitions=3, timeseries=False)))
    cur = results.load(rs.write(tmp_path / "c", rs.Synth(repetitions=3, timeseries=False, noise=2)))
    c = compare.compare(base, cur, effect=0.15)
    note = next(n for n in c.notes if n.startswith("to catch a 15 % change"))
    assert note.startswith(
        "to catch a 15 % change with 90 % power at this comparison's FDR, per side: throughput_bps "
    )
