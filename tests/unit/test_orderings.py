"""Orderings the papers show (reports/orderings.py): a step holds only when the 95 %
interval of the difference of two rows lies above 0; the verdict cannot pass on missing
rows, a difference within its interval or a reversal; every ordering names shipped
references."""

from __future__ import annotations

import math

import pytest

from reports import orderings, refspec
from reports import references as refs


def check(ref_id: str, mean: float, low: float, high: float, n: int = 5) -> refs.Check:
    return refs.Check(ref_id, None, mean, n, "inconclusive", low=low, high=high)


T1 = orderings.ORDERINGS["000"][0]  # Table I, Linux column: 0 > 100 > 500 ms


def judge(*rows: tuple[float, float, float]) -> orderings.Judged:
    checks = {i: check(i, *r) for i, r in zip(T1.ids, rows, strict=True)}
    return orderings.judge(T1, checks)


def test_disjoint_intervals_in_the_papers_order_reproduce_it() -> None:
    j = judge((90, 80, 100), (60, 50, 70), (20, 10, 30))
    assert (j.verdict, [s.state for s in j.steps]) == ("reproduced", ["holds", "holds"])
    assert j.ours[0] == "90 [80, 100]"


def test_a_difference_within_its_interval_leaves_it_open_even_when_the_means_are_ordered() -> None:
    j = judge((90, 60, 120), (80, 50, 110), (20, 10, 30))
    assert (j.verdict, [s.state for s in j.steps]) == ("inconclusive", ["open", "holds"])
    # overlapping intervals can still hold: difference 15, half-width hypot(10, 10) = 14.1
    assert orderings.step(check("a", 75, 65, 85), check("b", 60, 50, 70)) == "holds"
    assert orderings.step(check("a", 73, 63, 83), check("b", 60, 50, 70)) == "open"


def test_a_reversed_step_contradicts_it() -> None:
    j = judge((90, 80, 100), (20, 10, 30), (60, 50, 70))
    assert (j.verdict, [s.state for s in j.steps]) == ("contradicted", ["holds", "reversed"])


def test_a_row_without_an_interval_is_not_comparable_never_reproduced() -> None:
    j = judge((90, 80, 100), (60, math.nan, math.nan), (20, 10, 30))
    assert (j.verdict, j.steps[0].state) == ("not comparable", "missing")
    assert orderings.judge(T1, {}).verdict == "not comparable"  # nothing ran
    assert orderings.judge_all("000", [])[0].verdict == "not comparable"


GAINS = orderings.ORDERINGS["003"][-2]  # scenario 1 at 60 m: TCP-DOOR gain > D-SACK gain > 0


def judge_gains(
    door: tuple[float, float, float], dsack: tuple[float, float, float]
) -> orderings.Judged:
    rows = dict(zip(GAINS.ids, (door, dsack), strict=True))
    return orderings.judge(GAINS, {i: check(i, *r) for i, r in rows.items()})


def test_gains_over_a_baseline_end_with_the_baseline_itself() -> None:
    assert "60 m" in GAINS.title and GAINS.above == 0.0
    j = judge_gains((60, 45, 75), (25, 15, 35))
    assert (j.verdict, [s.state for s in j.steps]) == ("reproduced", ["holds", "holds"])
    assert j.ours[-1] == "0" and j.steps[-1].b == "0"
    # D-SACK's interval holding 0: no better than NoPR is not shown, so never reproduced
    j = judge_gains((60, 45, 75), (8, -4, 20))
    assert (j.verdict, [s.state for s in j.steps]) == ("inconclusive", ["holds", "open"])
    # D-SACK below NoPR contradicts it even when TCP-DOOR leads
    j = judge_gains((60, 45, 75), (-20, -30, -10))
    assert (j.verdict, j.steps[-1].state) == ("contradicted", "reversed")
    # no gains at all (every method alike): neither step holds
    j = judge_gains((1, -5, 7), (0, -6, 6))
    assert (j.verdict, [s.state for s in j.steps]) == ("inconclusive", ["open", "open"])
    assert judge_gains((60, 45, 75), (25, math.nan, math.nan)).verdict == "not comparable"


@pytest.mark.parametrize("paper", sorted(orderings.ORDERINGS))
def test_every_ordering_names_shipped_references_in_the_papers_order(paper: str) -> None:
    entries = refspec.load_all()
    for o in orderings.ORDERINGS[paper]:
        values = [entries[i].ref.value for i in o.ids]  # KeyError: an unknown id
        assert all(e.paper.id == paper for e in (entries[i] for i in o.ids))
        if o.above is not None:
            values.append(o.above)
        assert values == sorted(values, reverse=True), o.title  # the paper's own order


def test_report_section_lists_each_ordering_with_its_verdict() -> None:
    text = "\n".join(orderings.lines([judge((90, 80, 100), (60, 50, 70), (20, 10, 30))]))
    assert "### Orderings the paper shows" in text
    assert "| 94 > 89 > 23 % | 90 [80, 100] > 60 [50, 70] > 20 [10, 30] | holds, holds |" in text
