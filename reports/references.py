"""Published numbers (reports/references/*.yaml) and their comparison with a campaign's.

A reference names the paper, the table or figure, the conditions under which the paper
measured it (matched against each run's variant and sweep point), our metric and how to
scale it into the paper's unit, the value and a tolerance with the reason for its width.
`check()` turns a reference and a campaign's results into a verdict that can fail:

- ours is a sample of one value per repetition (the matching runs of a repetition
  aggregated), given as its mean with a 95 % t interval; n counts repetitions;
- the window is the paper's value +- the tolerance; a bound ("never above") is two-sided:
  a sanity floor (a number, or a fraction of the runs' configured capacity) below it;
- "reproduced" when the interval lies inside the window, "contradicted" when wholly
  outside, otherwise "inconclusive" with the n that would decide it (from the observed SD);
- "uninformative" when the window includes the no-effect value (0 %, a ratio of 1) and
  the interval lies inside it or straddles its edge: such a window can never make a row
  reproduced, since a result inside it cannot tell the paper's effect from none; an
  interval wholly outside it is "contradicted" all the same;
- "configuration check" when the metric is a configured quantity (paper 004's buffer
  rule computed from the paths), which cannot fail by measurement: counted apart;
- "not comparable" with the reason when no run, metric or kernel feature allows it.

The files' schema and loading are reports/refspec.py, the runs' facts and the matching of
conditions reports/refmatch.py, the interval and verdict arithmetic reports/refstats.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mprig.errors import SpecError, UsageError
from reports.refmatch import CONFIGURED, available_cc, describe, match, run_facts
from reports.refspec import REFERENCES_DIR, Entry, Reference, load_all, select
from reports.refstats import NAN, Estimate, NotComparable, Verdict, decide, estimate
from reports.results import Results
from reports.tables import sig

if TYPE_CHECKING:
    import pandas as pd

COUPLED_CC = frozenset(
    {"lia", "olia", "balia", "wvegas", "fully_coupled", "fccc", "prr_lia", "door_lia", "door_fccc"}
)  # multipath-aware


# --- checking ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """Ours next to the paper's: a mean over repetitions with its interval and window."""

    id: str
    entry: Entry | None  # None: the campaign named an unknown id
    ours: float | None  # mean over repetitions, in the paper's unit (a ratio of means)
    n: int  # repetitions that went into ours (the `conditions` side)
    verdict: Verdict
    reason: str = ""
    low: float = NAN  # 95 % confidence interval of ours; NaN when n < 2
    high: float = NAN
    window: tuple[float, float] | None = None  # what the paper's value allows
    n_needed: int | None = None  # inconclusive: repetitions that would decide it
    n_base: int = 0  # repetitions of the `relative_to` side

    @property
    def difference(self) -> float | None:
        if self.ours is None or self.entry is None:
            return None
        return self.ours - self.entry.ref.value


@dataclass(frozen=True)
class Sample:
    """One side of a reference: a value per repetition, and the runs behind them."""

    values: np.ndarray  # per repetition: the matching runs' metric, aggregated, x scale
    runs: pd.DataFrame  # the completed matching runs


def _side(facts: pd.DataFrame, conditions: dict[str, Any], ref: Reference) -> Sample:
    try:
        rows = match(facts, conditions)
    except KeyError as e:
        raise NotComparable(
            f"condition {e.args[0]!r} is neither a sweep axis nor a variant or path field here"
        ) from e
    if rows.empty:
        raise NotComparable(f"no run matches conditions ({describe(conditions)})")
    done = rows[rows["status"] == "complete"]
    if done.empty:
        reasons = sorted({str(r) for r in rows.get("reason", ["no reason recorded"])})
        raise NotComparable(f"all {len(rows)} matching runs failed: {'; '.join(reasons)}")
    values = done[ref.metric].astype(float) * ref.scale
    per_rep = values.groupby(done["repetition"]).agg(ref.aggregate).dropna()
    if per_rep.empty:
        raise NotComparable(f"metric {ref.metric} has no values in the matching runs")
    return Sample(per_rep.to_numpy(dtype=float), done)


def _window(entry: Entry, sd: float, capacity: float) -> tuple[float, float]:
    ref = entry.ref
    slack = entry.tolerance.bound(ref.value, sd)
    if ref.kind == "at_most":
        # capacity is in bits/s: the floor takes the metric's scale like the values do
        floor = (
            ref.floor if ref.floor is not None else (ref.floor_capacity or 0) * capacity * ref.scale
        )
        return floor, ref.value + slack
    if ref.kind == "at_least":
        return ref.value - slack, ref.ceiling if ref.ceiling is not None else math.inf
    return ref.value - slack, ref.value + slack


def window_includes_no_effect(entry: Entry, sd: float = NAN, capacity: float = NAN) -> bool:
    """Whether the window allows the no-effect value (unknown windows do not)."""
    lo, hi = _window(entry, sd, capacity)
    return bool(lo <= entry.ref.null_value <= hi)


def _collapsed(sample: Sample, ref: Reference) -> int:
    """Runs under the sanity floor: floor_capacity x their own configured capacity."""
    if ref.floor_capacity is None or "capacity_bps" not in sample.runs.columns:
        return 0
    runs = sample.runs
    floor = ref.floor_capacity * runs["capacity_bps"].astype(float) * ref.scale
    return int((runs[ref.metric].astype(float) * ref.scale < floor).sum())


def _check_requires(results: Results, ref: Reference) -> str:
    """Raise when a required congestion control is missing; returns a hint when the hosts'
    facts do not say which ones are available."""
    if not ref.requires.congestion_control:
        return ""
    wanted = " or ".join(ref.requires.congestion_control)
    coupled = "coupled " if set(ref.requires.congestion_control) & COUPLED_CC else ""
    available, kernels = available_cc(results)
    if available is None:
        return (
            f"; needs {coupled}congestion control ({wanted}), and run.json does not "
            "record net.ipv4.tcp_available_congestion_control"
        )
    if not available & set(ref.requires.congestion_control):
        raise NotComparable(
            f"{coupled}congestion control ({wanted}) not available on this kernel "
            f"({kernels}); available: {' '.join(sorted(available))}"
        )
    return ""


def _samples(results: Results, facts: pd.DataFrame, ref: Reference) -> tuple[Sample, Sample | None]:
    hint = _check_requires(results, ref)
    if ref.metric not in facts.columns:
        raise NotComparable(f"metric {ref.metric} missing: not collected for this campaign")
    try:
        a = _side(facts, ref.conditions, ref)
    except NotComparable as e:
        raise NotComparable(f"{e}{hint}") from e
    if ref.relative_to is None:
        return a, None
    return a, _side(facts, ref.relative_to, ref)


def _fmt(x: float) -> str:
    return sig(x)


def shown_window(ref: Reference, window: tuple[float, float]) -> tuple[float, float]:
    """WINDOW as a report shows it: from 0 when the quantity cannot be negative (OOO-BO's
    [-1 590, 1 810] KB is [0, 1 810] KB). A window that reaches below 0 holds the no-effect
    value 0 either way, so it is uninformative unless our interval lies wholly outside it."""
    lo, hi = window
    return (max(lo, 0.0), hi) if ref.nonnegative and lo < 0 else (lo, hi)


def _configuration(entry: Entry, est: Estimate) -> Check:
    ref = entry.ref
    lo, hi = _window(entry, NAN, NAN)
    holds = "holds" if lo <= est.mean <= hi else "does not hold"
    reason = (
        f"{holds}: configured {est.mean:g} {ref.unit} (paper {ref.value:g} {ref.unit}, "
        f"{entry.tolerance}); computed from the configured paths, not measured"
    )
    return Check(ref.id, entry, est.mean, est.n, "configuration check", reason,
                 window=(lo, hi))  # fmt: skip


def judge(entry: Entry, a: Sample, b: Sample | None) -> Check:
    """The verdict of one reference on its samples (pure)."""
    ref = entry.ref
    est = estimate(a.values, None if b is None else b.values, ref.relation)
    if ref.metric in CONFIGURED:
        return _configuration(entry, est)
    capacity = float(a.runs["capacity_bps"].mean()) if "capacity_bps" in a.runs else NAN
    window = _window(entry, est.sd, capacity)
    if window[0] > window[1]:  # no value could pass: the reference, not the runs, is wrong
        raise NotComparable(
            f"the window [{_fmt(window[0])}, {_fmt(window[1])}] {ref.unit} is empty: the "
            f"sanity floor lies above the bound on these paths; fix the reference's floor"
        )
    base = Check(ref.id, entry, est.mean, est.n, "inconclusive", "", est.low, est.high, window,
                 None, est.n_base)  # fmt: skip
    verdict, n_more = decide(est.mean, est.low, est.high, est.n_eff, window, est.sd)
    if verdict != "contradicted" and window[0] <= ref.null_value <= window[1]:
        return replace(base, verdict="uninformative", reason=_uninformative(ref, est, window))
    reason = _reason(verdict, est, shown_window(ref, window), n_more)
    collapsed = _collapsed(a, ref)
    if collapsed:
        reason = (
            f"{collapsed} of {len(a.runs)} runs under the sanity floor "
            f"({ref.floor_capacity:g} x configured capacity): collapsed; {reason}"
        )
        if verdict == "reproduced":
            verdict, reason = "inconclusive", reason + "; a collapsed run cannot reproduce"
    reason = "; ".join(x for x in (reason, ref.note) if x)
    return replace(base, verdict=verdict, reason=reason, n_needed=n_more)


def _uninformative(ref: Reference, est: Estimate, window: tuple[float, float]) -> str:
    """Why a window holding the no-effect value decides nothing unless the CI lies wholly
    outside it (then judge() calls the row contradicted)."""
    low, high = shown_window(ref, window)
    reason = (
        f"the window [{_fmt(low)}, {_fmt(high)}] {ref.unit} includes the no-effect value "
        f"{ref.null_value:g}: a result inside it cannot tell the paper's effect from none"
    )
    if est.n_eff < 2 or math.isnan(est.low) or math.isnan(est.high):
        return reason
    ci = f"95 % CI [{_fmt(est.low)}, {_fmt(est.high)}]"
    if est.low >= window[0] and est.high <= window[1]:
        return f"{reason}; {ci} inside it"
    return f"{reason}; {ci} straddles it, only one wholly outside decides (contradicted)"


def _reason(verdict: str, est: Estimate, window: tuple[float, float], n_more: int | None) -> str:
    ci = f"95 % CI [{_fmt(est.low)}, {_fmt(est.high)}]"
    win = f"window [{_fmt(window[0])}, {_fmt(window[1])}]"
    if est.n_eff < 2:
        return f"n = {est.n_eff}: no interval; at least 2 repetitions needed (full profile: 5+)"
    if math.isnan(window[0]) or math.isnan(window[1]):
        return f"{ci}; the window needs our run-to-run SD"
    if verdict == "reproduced":
        return f"{ci} inside the {win}"
    if verdict == "contradicted":
        return f"{ci} wholly outside the {win}"
    more = f"about n = {n_more} would decide it" if n_more else "no n decides it"
    return f"{ci} straddles the {win}; {more} (observed SD {_fmt(est.sd)})"


def _facts_with_reasons(results: Results) -> pd.DataFrame:
    facts = run_facts(results)
    if "reason" not in facts.columns:
        facts["reason"] = [
            results.bundles.get(str(r), {}).get("reason", "no reason recorded")
            for r in facts["run_id"]
        ]
    return facts


def check(results: Results, entries: dict[str, Entry], ids: list[str] | None = None) -> list[Check]:
    """Check the references the campaign names (or IDS) against its results."""
    if ids is None:
        ids = select(tuple(results.spec.get("references") or ()), entries)
    facts = _facts_with_reasons(results)
    out = []
    for ref_id in ids:
        entry = entries.get(ref_id)
        if entry is None:
            what = "no reference id matches" if set("*?[") & set(ref_id) else "no such reference"
            reason = f"{what} in reports/references"
            out.append(Check(ref_id, None, None, 0, "not comparable", reason))
            continue
        try:
            out.append(judge(entry, *_samples(results, facts, entry.ref)))
        except NotComparable as e:
            out.append(Check(ref_id, entry, None, 0, "not comparable", str(e)))
    return out


def matched_variants(results: Results, entry: Entry) -> tuple[set[str], ...]:
    """The variants whose runs each side of ENTRY's conditions meets (any status)."""
    facts = run_facts(results)
    sides = [entry.ref.conditions, *([entry.ref.relative_to] if entry.ref.relative_to else [])]
    out = []
    for conditions in sides:
        try:
            out.append(set(map(str, match(facts, conditions)["variant"])))
        except KeyError:
            out.append(set())
    return tuple(out)


def load_for(results: Results, directory: Path | None = None) -> list[Check]:
    """Load the references and check the ones RESULTS' campaign names."""
    if not results.spec.get("references"):
        return []
    try:
        entries = load_all(directory or REFERENCES_DIR)
    except SpecError:
        raise
    except OSError as e:
        raise UsageError(f"{directory or REFERENCES_DIR}: cannot read references: {e}") from e
    return check(results, entries)
