"""`mprig nightly CAMPAIGN --baseline DIR --history DIR`: tonight's regression verdict."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from mprig.cli.argtypes import bounded_int
from reports.cmd_compare import EFFECT, TOLERANCE

EPILOG = """\
examples:
  mprig nightly experiments/nightly.yaml --baseline /var/lib/mprig/baseline \\
      --history /var/lib/mprig/history --results /var/lib/mprig/nights --keep 14
  mprig nightly experiments/nightly.yaml --baseline b/ --history h/ \\
      --from-results results/nightly          judge results that were already collected
Runs and collects the campaign into RESULTS/<date>/<campaign>/, writes its report, compares
it with BASELINE (the first night becomes the baseline), appends one row per metric,
variant and sweep point to HISTORY/history.parquet, redraws HISTORY/trend.png, deletes all
but the KEEP newest nights, and prints ONE line:
  nightly 2026-11-21: REGRESSION goodput_bps mptcp -17.2 % [-21.0, -13.1] q=0.0004
  nightly 2026-11-21: OK (14 metrics, 0 regressions; changes -3.1 to +2.9 %,
      median 95 % CI ±4.2 %; FDR 5 % over 52 rows)        (one line)
Rows whose spread (history and tonight) cannot find an --effect change even alone are
shown as underpowered and not judged; when tonight's repetitions are fewer than the
history's spread of throughput and goodput needs for --effect, the line ends with
  ; WARNING: 3 repetitions, 5 needed to find a 15 % change (throughput_bps spread ...)
Exit status: 0 ok (or baseline set), 1 regression, 2 error.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "nightly",
        help="run, collect, report and judge a campaign against a baseline; one verdict line",
        description="The nightly regression run.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("campaign", type=Path, metavar="CAMPAIGN", help="campaign YAML file")
    p.add_argument("--baseline", type=Path, required=True, help="baseline results directory")
    p.add_argument("--history", type=Path, required=True, help="history directory")
    p.add_argument(
        "--results",
        type=Path,
        default=Path("results/nightly"),
        help="root of the nights' results (results/nightly)",
    )
    keep = bounded_int(0, 100_000, "nights; 0 keeps all")
    p.add_argument("--keep", type=keep, default=14, help="nights of results to keep (14; 0: all)")
    p.add_argument("--tolerance", type=TOLERANCE, default=0.05, help="relative tolerance (0.05)")
    p.add_argument(
        "--effect",
        type=EFFECT,
        default=0.15,
        help="the change the night must find, relative (0.15); sizes the repetitions needed",
    )
    p.add_argument("--rig", default=None, metavar="NAME", help="virtual rig name for mprig run")
    p.add_argument("--date", default=None, help="night label YYYY-MM-DD (default: today, UTC)")
    p.add_argument(
        "--from-results",
        type=Path,
        default=None,
        metavar="DIR",
        help="skip run and collect: judge this collected results directory",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mprig.errors import MprigError, UsageError, error_lines
    from reports import nightly

    date = args.date or time.strftime("%Y-%m-%d", time.gmtime())
    if not nightly.NIGHT.match(date):
        raise UsageError(f"--date must be YYYY-MM-DD, got {date!r}")
    if args.keep < 0:
        raise UsageError(f"--keep must be >= 0, got {args.keep}")
    night_root = args.results / date
    try:
        results = args.from_results or nightly.run_and_collect(
            args.campaign, night_root, night_root / "nightly.log", args.rig
        )
    except MprigError as e:  # one verdict line: the first error, and how to see them all
        lines = error_lines(e)
        more = f" (and {len(lines) - 1} more: mprig validate)" if len(lines) > 1 else ""
        print(f"nightly {date}: ERROR {lines[0]}{more}")
        return 2
    night = nightly.nightly(
        date, Path(results), args.baseline, args.history, args.tolerance, args.effect
    )
    if args.from_results is None and args.results.is_dir():
        nightly.prune(args.results, args.keep)
    print(night.verdict)
    return night.exit_code
