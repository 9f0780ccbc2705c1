"""Per-block application delay in a reproduction report (traffic tool `blocks`; paper 004
Fig. 7): per variant, the mean over runs of each run's delay quantile with its 95 %
interval, in milliseconds. Pure: results in, Markdown lines out.

Each run contributes one value per quantile (`block_delay_p50_s` ... from `mprig collect`,
docs/metrics.md), so the interval is over repetitions, as every other cell of a report."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from reports.stats import summary_ci
from reports.tables import markdown_table, sig

if TYPE_CHECKING:
    from reports.results import Results

QUANTILES = (
    ("block_delay_p50_s", "p50"),
    ("block_delay_p95_s", "p95"),
    ("block_delay_p99_s", "p99"),
    ("block_delay_max_s", "max"),
)


def delay_rows(results: Results) -> list[dict[str, str]]:
    """One row per variant with block delays: runs, then "mean [low, high]" ms per quantile
    (no interval below three runs). Empty when no complete run wrote blocks."""
    runs = results.complete
    first = QUANTILES[0][0]
    if first not in runs.columns or runs[first].isna().all():
        return []
    named = [v["name"] for v in results.spec.get("variants", [])]  # the campaign's order
    present = set(runs["variant"])
    rows = []
    for variant in [v for v in named if v in present] + sorted(present - set(named)):
        group = runs[runs["variant"] == variant]
        if group[first].isna().all():
            continue
        row = {"variant": str(variant), "runs": str(int(group[first].notna().sum()))}
        for column, label in QUANTILES:
            ci = summary_ci(group[column].astype(float) * 1000)
            interval = "" if math.isnan(ci.low) else f" [{sig(ci.low)}, {sig(ci.high)}]"
            row[f"{label} ms"] = f"{sig(ci.mean)}{interval}"
        rows.append(row)
    return rows


def delay_lines(results: Results) -> list[str]:
    """The section: a title, what the numbers are, the table; nothing without block runs."""
    rows = delay_rows(results)
    if not rows:
        return []
    return [
        "### Per-block application delay (traffic tool blocks)",
        "",
        "Send-to-receive delay of each block, quantiles per run (docs/metrics.md); each cell "
        "is the mean over runs with its 95 % interval, in ms.",
        "",
        *markdown_table(rows),
        "",
    ]
