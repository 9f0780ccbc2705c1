"""`mprig report RESULTS`: tables, figures and paper references of a campaign."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """\
examples:
  mprig report results/smoke                   HTML, Markdown, LaTeX, CSV in results/smoke/report/
  mprig report results/smoke --format html     only the self-contained HTML file
  mprig report results/000-t3 --format md,tex --out paper/
  mprig report results/smoke --overlay other/smoke   both campaigns on one figure per axis
Then one line per variant and sweep point: the report's headline cells (mean ± 95 % t
half-width, [low, high] when clipped at 0, "n too small" below 3 repetitions) and n.
The last line printed is the path of the HTML report (when html is among the formats).
A partial campaign is reported with its missing runs listed; failed runs with their reasons.
"""


ARCHIVED_REPORTS = Path("results") / "archived-reports"  # an archive's reports, kept out of it


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="write tables, figures and paper comparisons of a campaign's results",
        description="Write the report of a collected campaign (runs.parquet, run bundles).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", type=Path, metavar="RESULTS", help="results/<campaign> directory")
    p.add_argument("--format", default="html,md,tex,csv", help="comma list of html,md,tex,csv")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (RESULTS/report/; for an archive, which keeps only what its "
        "manifest lists, results/archived-reports/<campaign>/)",
    )
    p.add_argument(
        "--overlay",
        type=Path,
        action="append",
        default=[],
        metavar="RESULTS_B",
        help="draw this campaign's metrics on the same figures (repeatable; e.g. another kernel)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from reports import report, results
    from reports.tables import terminal_summary

    formats = report.parse_formats(args.format)
    loaded = results.load(args.results)
    out = args.out or (
        ARCHIVED_REPORTS / loaded.name if loaded.archived else args.results / "report"
    )
    overlays = [results.load(path) for path in args.overlay]
    written = report.write_report(loaded, out, formats, overlays)
    counts = (len(loaded.complete), len(loaded.runs) - len(loaded.complete), len(loaded.missing))
    print(
        f"report {loaded.name}: {counts[0]} complete, {counts[1]} failed, {counts[2]} missing runs"
    )
    for line in terminal_summary(loaded):
        print(line)
    for fmt in ("csv", "tex", "md", "html"):
        if fmt in written:
            print(written[fmt])
    return 0
