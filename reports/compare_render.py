"""A comparison (reports/compare.py) as text: the one-line summary `mprig compare` and
`mprig nightly` print, and the Markdown and HTML tables."""

from __future__ import annotations

import math

import numpy as np

from reports import directions as dirs
from reports.compare import FDR, JUDGED, Comparison, Row
from reports.results import point_label


def pct(ratio: float) -> str:
    """A ratio as a signed change: 0.83 -> "-17.0 %"."""
    return "–" if math.isnan(ratio) else f"{(ratio - 1) * 100:+.1f} %"


def where(row: Row) -> str:
    """Variant and sweep point of a row: "mptcp @ wifi.distance_m=50"."""
    return row.variant + (f" @ {point_label(row.point)}" if row.point else "")


def worst(rows: list[Row]) -> Row:
    """The regression farthest beyond its tolerance (by the interval's near end)."""
    return max(rows, key=lambda r: (1 - r.high) if r.direction == dirs.HIGHER else (r.low - 1))


def spread(c: Comparison) -> str:
    """The night's spread over its judged rows: `changes -3.1 to +2.9 %, median 95 % CI
    ±4.2 %; FDR 5 % over 30 rows`."""
    judged = [r for r in c.rows if r.verdict in JUDGED and not math.isnan(r.ratio)]
    if not judged:
        weak = sum(r.verdict.startswith("underpowered") for r in c.rows)
        return f"no judged rows, {weak} underpowered" if weak else "no judged rows"
    changes = [r.change_pct for r in judged]
    widths = [(r.high - r.low) / 2 * 100 for r in judged if not math.isnan(r.low)]
    median = f"median 95 % CI ±{float(np.median(widths)):.1f} %; " if widths else ""
    weak = sum(r.verdict.startswith("underpowered") for r in c.rows)
    return (
        f"changes {min(changes):+.1f} to {max(changes):+.1f} %, {median}"
        f"FDR {FDR * 100:g} % over {len(judged)} rows" + (f", {weak} underpowered" if weak else "")
    )


def summary_line(c: Comparison) -> str:
    """One line: `REGRESSION goodput_bps mptcp -17.2 % [-21.0, -13.1] q=0.0004 (+2 more)`
    or `OK (14 metrics, 0 regressions; changes ..., median 95 % CI ...; FDR ...)`."""
    metrics = len({r.metric for r in c.rows})
    regs = c.regressions
    n = len(c.corrupt)
    bad = f"; {n} corrupt run{'s' if n > 1 else ''} excluded" if n else ""
    if not regs:
        head = "CORRUPT" if n else "OK"
        return f"{head} ({metrics} metrics, 0 regressions; {spread(c)}{bad})"
    r = worst(regs)
    more = f" (+{len(regs) - 1} more)" if len(regs) > 1 else ""
    return (
        f"REGRESSION {r.metric} {where(r)} {pct(r.ratio)} "
        f"[{(r.low - 1) * 100:+.1f}, {(r.high - 1) * 100:+.1f}] q={r.q_value:.2g}{more}{bad}"
    )


def display_rows(c: Comparison) -> list[dict[str, str]]:
    """Rows for Markdown and HTML, regressions first."""
    order = {"regression": 0, "improvement": 1}
    rows = sorted(c.rows, key=lambda r: (order.get(r.verdict, 2), r.metric, r.variant))
    return [
        {
            "metric": r.metric,
            "where": where(r),
            "n": f"{r.n_baseline}/{r.n_current}",
            "baseline": f"{r.median_baseline:.4g}",
            "current": f"{r.median_current:.4g}",
            "change": pct(r.ratio),
            "interval": "–" if math.isnan(r.low) else f"[{pct(r.low)}, {pct(r.high)}]",
            "p": "–" if math.isnan(r.p_value) else f"{r.p_value:.2g}",
            "q": "–" if math.isnan(r.q_value) else f"{r.q_value:.2g}",
            "verdict": r.verdict,
        }
        for r in rows
    ]


COLUMNS = ("metric", "where", "n", "baseline", "current", "change", "interval", "q", "p", "verdict")


def render_markdown(c: Comparison) -> str:
    lines = [
        f"# Compare {c.campaign}",
        "",
        f"Baseline `{c.baseline}`, current `{c.current}`; tolerance {c.tolerance:.0%}; "
        "effect: ratio of medians with a bootstrap 95 % interval; q: one-sided Welch test of "
        f"a change beyond the tolerance, Benjamini-Hochberg adjusted over the judged rows "
        f"(regression at q <= {FDR:g}); p: Mann-Whitney U, for reference.",
        "",
        f"**{summary_line(c)}**",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "| " + " | ".join("---" for _ in COLUMNS) + " |",
    ]
    lines += ["| " + " | ".join(r[k] for k in COLUMNS) + " |" for r in display_rows(c)]
    lines += ["", *(f"- {n}" for n in c.notes)]
    return "\n".join(lines) + "\n"


def render_html(c: Comparison) -> str:
    from reports.html import render

    return render(
        "compare.html.j2", c=c, summary=summary_line(c), rows=display_rows(c), columns=COLUMNS
    )
