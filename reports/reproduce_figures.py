"""A committed reproduction's figures, drawn again from its metrics.parquet: the figures
code can change (a readability fix) without running the campaigns again. `mprig reproduce
--html` (`make papers-docs`) does this before it renders report.html."""

from __future__ import annotations

from pathlib import Path

from reports import figures
from reports.reproduce_html import campaign_results, read


def redraw(root: Path) -> list[Path]:
    """ROOT/figures/<campaign stem>/ drawn again, as `mprig reproduce` draws them; returns
    the PNGs written. Reads only ROOT's committed verdicts.json and metrics.parquet."""
    committed = read(root)
    written = []
    for campaign in committed.verdicts["campaigns"]:
        results = campaign_results(committed.metrics, campaign)
        if results.runs.empty or results.complete.empty:
            continue  # not run in this profile: no figure, as at reproduce time
        stem = campaign.removesuffix(f"-{committed.verdicts.get('profile', '')}")
        written += [p.png for p in figures.axis_figures(results, root / "figures" / stem)]
    return written
