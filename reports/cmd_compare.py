"""`mprig compare BASELINE CURRENT`: regression verdict between two result sets."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from mprig.cli.argtypes import bounded_float

TOLERANCE = bounded_float(0.0, 10.0, "relative: 0.05 is 5%")
EFFECT = bounded_float(0.0, 1.0, "relative: 0.15 is a 15% change")

FORMATS = ("md", "json", "html")
EPILOG = """\
examples:
  mprig compare results/nightly-2026-11-20/nightly results/nightly-2026-11-21/nightly
  mprig compare base/ cur/ --tolerance 0.10 --format json --out /tmp/cmp
Per metric and (variant, sweep point): the effect, ratio of medians current/baseline with a
seeded bootstrap 95 % interval (2000 resamples); q, a one-sided Welch test of a change
beyond the tolerance in the metric's bad direction, Benjamini-Hochberg adjusted over all
judged rows (regression at q <= 0.05); a Mann-Whitney U p-value for reference. The notes
say how many repetitions a change of --effect needs to be found with 90 % power.
Exit status: 0 no regression, 1 regression, 2 error (different campaigns, missing metrics
or runs: the message says which).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two result sets of a campaign; exit 1 on a regression",
        description="Compare CURRENT against BASELINE, metric by metric.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "baseline", type=Path, metavar="BASELINE", help="results/<campaign> of the baseline"
    )
    p.add_argument("current", type=Path, metavar="CURRENT", help="results/<campaign> to judge")
    p.add_argument("--tolerance", type=TOLERANCE, default=0.05, help="relative tolerance (0.05)")
    p.add_argument(
        "--effect", type=EFFECT, default=0.15, help="change to size repetitions for (0.15)"
    )
    p.add_argument("--format", default="md,json,html", help="comma list of md,json,html")
    p.add_argument("--out", type=Path, default=None, help="output directory (CURRENT/compare/)")
    p.set_defaults(func=run)


def write(comparison: object, out: Path, formats: list[str]) -> list[Path]:
    """Write the comparison in FORMATS into OUT; returns the files written."""
    from mprig import fsio
    from reports import compare, compare_render

    assert isinstance(comparison, compare.Comparison)
    out.mkdir(parents=True, exist_ok=True)
    writers: dict[str, tuple[str, Callable[[], str]]] = {
        "md": ("compare.md", lambda: compare_render.render_markdown(comparison)),
        "json": ("compare.json", lambda: json.dumps(comparison.to_dict(), indent=1, default=str)),
        "html": ("compare.html", lambda: compare_render.render_html(comparison)),
    }
    written = []
    for fmt in formats:
        name, render = writers[fmt]
        written.append(fsio.write_text(out / name, render()))
    return written


def run(args: argparse.Namespace) -> int:
    from reports import compare, compare_render, results
    from reports.report import parse_formats

    formats = parse_formats(args.format, FORMATS)
    comparison = compare.compare(
        results.load(args.baseline), results.load(args.current), args.tolerance, args.effect
    )
    for path in write(comparison, args.out or args.current / "compare", formats):
        print(path)
    for row in comparison.regressions:
        print(
            f"regression: {row.metric} {compare_render.where(row)} {compare_render.pct(row.ratio)}"
        )
    print(compare_render.summary_line(comparison))
    return comparison.exit_code
