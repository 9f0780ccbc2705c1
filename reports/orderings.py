"""Orderings the papers show: several reference rows whose values the paper puts in an order
(Table I's gain falling with the delay difference, Table III's solutions at 70 m), judged
on our runs from the rows' own checks. An ordering of gains over one baseline (paper 003's
"TCP-DOOR +66 %, D-SACK +33 % over NoPR") ends with the baseline as a value: its last row
must also lie above `above` (0 % gain), a step that holds when that row's interval does.

A step "a above b" holds when the 95 % interval of the difference a - b lies above 0, is
reversed when it lies below 0, and is open otherwise. The rows are independent samples, so
the difference's half-width is sqrt(h_a^2 + h_b^2) from the rows' own half-widths (each a
t x standard error). The ordering is reproduced when every step holds, contradicted when
any step is reversed, not comparable when a row has no interval, otherwise inconclusive.

Pure: checks in, verdicts and Markdown out.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reports.tables import sig

if TYPE_CHECKING:
    from reports.references import Check


@dataclass(frozen=True)
class Ordering:
    """A paper's claim that rows `ids` (reference ids) come in this order, highest first."""

    title: str
    ids: tuple[str, ...]
    paper: str  # the paper's values, as it prints them
    above: float | None = None  # the last row must also lie above this value (a gain's 0)


@dataclass(frozen=True)
class Step:
    """One adjacent pair of an ordering: a is claimed above b."""

    a: str
    b: str  # a reference id, or the ordering's `above` value
    state: str  # holds | reversed | open | missing


@dataclass(frozen=True)
class Judged:
    ordering: Ordering
    verdict: str  # reproduced | contradicted | inconclusive | not comparable
    steps: tuple[Step, ...]
    ours: tuple[str, ...]  # per row: "mean [low, high]" or "–"


def _t1(column: str) -> Ordering:
    name = {"linux": "Linux", "ns3": "NS-3"}[column]
    paper = "94 > 89 > 23 %" if column == "linux" else "90 > 80 > 20 %"
    return Ordering(
        f"Table I, {name} column: MPTCP's gain over TCP falls with the delay difference "
        "(0 > 100 > 500 ms)",
        tuple(f"000-t1-{column}-{d}ms" for d in (0, 100, 500)),
        paper,
    )


def _s1_gains(distance: int) -> Ordering:
    """Paper 003's text on scenario 1 (stated for distances below 70 m; 70 m is its edge):
    TCP-DOOR +66 % gThroughput over NoPR, D-SACK +33 % "with other CCs" than FC-CC."""
    edge = ", the edge of the text's 'below 70 m'" if distance >= 70 else ""
    return Ordering(
        f"Scenario 1 at {distance} m{edge}, Co-CC, gThroughput gain over NoPR: "
        "TCP-DOOR > D-SACK > 0",
        (f"003-text-s1-{distance}m-tcpdoor-gain-co", f"003-text-s1-{distance}m-dsack-gain-co"),
        "66 > 33 > 0 %",
        above=0.0,
    )


ORDERINGS: dict[str, tuple[Ordering, ...]] = {
    "000": (
        _t1("linux"),
        _t1("ns3"),
        Ordering(
            "Table III at 70 m, link utilisation: PR-R > NoPR > TCP-DOOR",
            ("000-t3-70m-prr-lu", "000-t3-70m-nopr-lu", "000-t3-70m-tcpdoor-lu"),
            "13.69 > 9.76 > 8.62 %",
        ),
        Ordering(
            "Table III at 70 m, OOO-R: PR-R > TCP-DOOR > D-SACK",
            ("000-t3-70m-prr-ooo-r", "000-t3-70m-tcpdoor-ooo-r", "000-t3-70m-dsack-ooo-r"),
            "61.4 > 24.8 > 17.5 %",
        ),
        Ordering(
            "Table III at 70 m, OOO-BO: PR-R > TCP-DOOR > NoPR",
            ("000-t3-70m-prr-ooo-bo", "000-t3-70m-tcpdoor-ooo-bo", "000-t3-70m-nopr-ooo-bo"),
            "252 > 126 > 77 KB",
        ),
    ),
    "003": (
        Ordering(
            "Table III, scenario 1 at 10 m, Co-CC: OOO-R TCP-DOOR > D-SACK > NoPR",
            ("003-t3-s1-tcpdoor-co", "003-t3-s1-dsack-co", "003-t3-s1-nopr-co"),
            "42.1 > 12.2 > 1.3 %",
        ),
        Ordering(
            "Table IV, scenario 1 at 10 m, Co-CC: OOO buffer Eifel > F-RTO > NoPR",
            ("003-t4-s1-eifel-co", "003-t4-s1-frto-co", "003-t4-s1-nopr-co"),
            "345.9 > 57.4 > 5.5 KB",
        ),
        Ordering(
            "Table IV, scenario 1 at 10 m, Co-CC: OOO buffer TCP-DOOR > D-SACK > NoPR",
            ("003-t4-s1-tcpdoor-co", "003-t4-s1-dsack-co", "003-t4-s1-nopr-co"),
            "299.4 > 30.1 > 5.5 KB",
        ),
        *(_s1_gains(d) for d in (10, 60, 70)),
    ),
}


def _interval(c: Check | None) -> tuple[float, float] | None:
    if c is None or c.ours is None or math.isnan(c.low) or math.isnan(c.high):
        return None
    return c.low, c.high


def step(a: Check | None, b: Check | None) -> str:
    """holds: the difference a - b is above 0 beyond its 95 % half-width; reversed: below
    0 beyond it; open: within it; missing: a side has no interval."""
    ia, ib = _interval(a), _interval(b)
    if ia is None or ib is None or a is None or b is None or a.ours is None or b.ours is None:
        return "missing"
    half = math.hypot((ia[1] - ia[0]) / 2, (ib[1] - ib[0]) / 2)
    diff = a.ours - b.ours
    if diff > half:
        return "holds"
    if diff < -half:
        return "reversed"
    return "open"


def step_above(a: Check | None, value: float) -> str:
    """holds: a's 95 % interval lies above VALUE; reversed: below it; open: it holds VALUE;
    missing: a has no interval."""
    ia = _interval(a)
    if ia is None:
        return "missing"
    if ia[0] > value:
        return "holds"
    if ia[1] < value:
        return "reversed"
    return "open"


def judge(ordering: Ordering, checks: dict[str, Check]) -> Judged:
    """The ordering's verdict from its rows' checks (by reference id)."""
    ids = ordering.ids
    steps = tuple(
        Step(a, b, step(checks.get(a), checks.get(b))) for a, b in itertools.pairwise(ids)
    )
    if ordering.above is not None:
        last = ids[-1]
        above = step_above(checks.get(last), ordering.above)
        steps += (Step(last, f"{ordering.above:g}", above),)
    states = {s.state for s in steps}
    if "missing" in states:
        verdict = "not comparable"
    elif "reversed" in states:
        verdict = "contradicted"
    elif states == {"holds"}:
        verdict = "reproduced"
    else:
        verdict = "inconclusive"
    ours = tuple(_ours(checks.get(i)) for i in ids)
    if ordering.above is not None:
        ours += (f"{ordering.above:g}",)
    return Judged(ordering, verdict, steps, ours)


def _ours(c: Check | None) -> str:
    if c is None or c.ours is None:
        return "–"
    if math.isnan(c.low):
        return f"{sig(c.ours)} (n = {c.n})"
    return f"{sig(c.ours)} [{sig(c.low)}, {sig(c.high)}]"


def judge_all(paper: str, checks: list[Check]) -> list[Judged]:
    by_id = {c.id: c for c in checks}
    return [judge(o, by_id) for o in ORDERINGS.get(paper, ())]


def lines(judged: list[Judged]) -> list[str]:
    """The report's section: one row per ordering, ours in the paper's order."""
    if not judged:
        return []
    out = [
        "### Orderings the paper shows",
        "",
        "A step holds when the 95 % interval of the difference (upper row minus lower row, "
        "half-width sqrt(h1^2 + h2^2) from the rows' own intervals) lies above 0, is reversed "
        "when it lies below 0, and stays open otherwise.",
        "",
        "| ordering | paper | ours, in the paper's order (mean [95 % CI]) | steps | verdict |",
        "|---|---|---|---|---|",
    ]
    for j in judged:
        steps = ", ".join(s.state for s in j.steps)
        out.append(
            f"| {j.ordering.title} | {j.ordering.paper} | {' > '.join(j.ours)} | {steps} "
            f"| {j.verdict} |"
        )
    return [*out, ""]


def as_json(judged: list[Judged]) -> list[dict[str, Any]]:
    return [
        {
            "title": j.ordering.title,
            "ids": list(j.ordering.ids),
            "verdict": j.verdict,
            "steps": [s.state for s in j.steps],
        }
        for j in judged
    ]
