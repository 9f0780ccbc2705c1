"""Whether two result sets can be compared (same campaign, complete, uncorrupted, sharing
metrics), and their complete runs grouped per (variant, sweep point). reports/compare.py
judges the groups; these checks raise UsageError naming what is missing."""

from __future__ import annotations

import math
from typing import Any

from mprig.errors import UsageError
from reports.results import Results, point_label

# Keys that do not change the experiment: prose, and which paper numbers it is held to.
IGNORED_SPEC_KEYS = ("description", "references")
MIN_RUNS = 2  # complete runs per side and group; a median of one run has no interval


def spec_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two spec snapshots."""
    fa, fb = _flatten(a), _flatten(b)
    keys = sorted(set(fa) | set(fb))
    return [k for k in keys if k.split(".")[0] not in IGNORED_SPEC_KEYS and fa.get(k) != fb.get(k)]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(value, list | tuple) and all(isinstance(v, dict) and "name" in v for v in value):
        out = {}
        for v in value:
            out.update(_flatten(v, f"{prefix}{v['name']}."))
        return out if value else {prefix.rstrip("."): []}
    return {prefix.rstrip("."): list(value) if isinstance(value, tuple) else value}


def check_same_campaign(baseline: Results, current: Results) -> None:
    """Refuse to compare results of different campaigns (or of an edited campaign)."""
    if baseline.name != current.name:
        raise UsageError(
            f"different campaigns: baseline {baseline.root} is {baseline.name!r}, "
            f"current {current.root} is {current.name!r}"
        )
    differ = spec_differences(baseline.spec, current.spec)
    if differ:
        shown = ", ".join(differ[:8]) + (f" and {len(differ) - 8} more" if len(differ) > 8 else "")
        raise UsageError(
            f"campaign {current.name!r} differs between baseline and current in: {shown}; "
            "compare results of the same campaign spec"
        )


def check_complete(results: Results, role: str) -> None:
    """A partial campaign cannot be compared: list the planned runs that are missing."""
    missing = results.missing
    if missing:
        ids = ", ".join(m["run_id"] for m in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise UsageError(
            f"{role} {results.root} is a partial campaign: {len(missing)} planned runs "
            f"missing ({ids}{more}); finish it with `mprig run` and `mprig collect`"
        )


def check_usable(results: Results, role: str) -> None:
    """What a baseline must be: complete, with MIN_RUNS complete runs at every point."""
    check_complete(results, role)
    if results.corrupt:
        ids = ", ".join(sorted(results.corrupt))
        raise UsageError(f"{role} results {results.root} have corrupt runs ({ids}); see the report")
    if results.complete.empty:
        raise UsageError(f"{role} results {results.root} have no complete run; see the report")
    for key, group in run_groups(results).items():
        if len(group) < MIN_RUNS:
            point = dict(zip(results.axes, key[1:], strict=True))
            raise UsageError(
                f"{role} results {results.root} have {len(group)} complete runs for {key[0]} "
                f"at {point_label(point)} (need {MIN_RUNS}); see the failed runs in the report"
            )


def common_metrics(baseline: Results, current: Results) -> tuple[list[str], list[str]]:
    """Metrics with data on both sides; a metric with data on one side only is an error."""
    have_b = {m for m in baseline.metrics if baseline.complete[m].notna().any()}
    have_c = {m for m in current.metrics if current.complete[m].notna().any()}
    if not have_b and not have_c:
        raise UsageError(f"{current.root}: no metric has data; did `mprig collect` run?")
    for role, res, absent in (
        ("current", current, sorted(have_b - have_c)),
        ("baseline", baseline, sorted(have_c - have_b)),
    ):
        if absent:
            raise UsageError(
                f"{role} {res.root} is missing metrics {', '.join(absent)}; "
                "collect both result sets with the same mprig version (a nightly baseline "
                "kept by an earlier mprig cannot be collected again: delete it, the next "
                "night sets it)"
            )
    notes = []
    empty = sorted(set(baseline.metrics) - have_b)
    if empty:
        notes.append(f"no data on either side, skipped: {', '.join(empty)}")
    return sorted(have_b), notes


def run_groups(results: Results) -> dict[tuple[Any, ...], Any]:
    """Complete runs per (variant, *sweep values) of every run present, so a point whose
    runs all failed appears with no rows; a value absent for a variant is "-"."""
    keys = ["variant", *results.axes]
    frame = results.runs.copy()
    for axis in results.axes:
        frame[axis] = [("-" if _isnan(v) else v) for v in frame[axis]]
    return {
        tuple(plain(v) for v in (k if isinstance(k, tuple) else (k,))): g[g["status"] == "complete"]
        for k, g in frame.groupby(keys, sort=True)
    }


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value (JSON-serialisable, hashable)."""
    return value.item() if hasattr(value, "item") else value
