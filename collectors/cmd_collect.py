"""`mprig collect`: metrics.json and timeseries.parquet into every run bundle, and
runs.parquet per campaign."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from collectors.cmd_analyze import BIN_TYPE, K_TYPE

EPILOG = """\
examples:
  mprig collect results/smoke           every run of the campaign; writes
                                        results/smoke/runs.parquet (one row per run)
  mprig collect results                 every campaign under results/
  mprig collect results/smoke --k 50 --bin 0.05
                                        K = 50 packets per receive-buffer block,
                                        50 ms goodput/throughput bins
  mprig collect results/smoke --force   analyse again even where metrics.json is current

Run it again at will: bundles whose metrics.json matches their artifacts and options are
not analysed again. Failed and interrupted runs get a row with their status and null
metrics. An unreadable artifact is reported as RUN/FILE: message; the other runs and the
other metrics of that run are kept, and the exit status is 1.

exit status: 0 collected; 1 artifact problems (listed; their metrics null, every table
written); 2 bad options or no run bundles; 4 could not collect (the directory in use by a
campaign or another collect, a file that could not be written, a bug: nothing to archive).
"""


def register(subparsers: Any) -> None:
    """Add the `collect` command."""
    p = subparsers.add_parser(
        "collect",
        help="compute metrics for every run of a campaign",
        description="Compute per-run metrics (captures, ss, nstat, iperf3) and runs.parquet.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", metavar="RESULTS", type=Path, help="results/<campaign> or results/")
    k_help = "packets per block for the receive-buffer metric (default 100)"
    p.add_argument("--k", type=K_TYPE, default=100, metavar="K", help=k_help)
    bin_help = "width of the goodput and throughput bins (default 0.1)"
    p.add_argument(
        "--bin", type=BIN_TYPE, default=0.1, metavar="SECONDS", dest="bin_s", help=bin_help
    )
    p.add_argument("--force", action="store_true", help="re-analyse every run")
    p.add_argument("--quiet", action="store_true", help="no per-run progress lines")
    p.set_defaults(func=collect)


def collect(args: argparse.Namespace) -> int:
    """Collect every campaign under RESULTS; 1 if any artifact could not be read, 4
    (NotCollected) if a campaign could not be collected, 2 for bad options."""
    from mprig.errors import MprigError, NotCollected, UsageError

    try:
        return _collect(args)
    except UsageError:
        raise
    except MprigError as e:  # in use, unwritable: not artifact problems
        raise NotCollected(str(e)) from e
    except Exception as e:  # a bug: its traceback for the report, and still not a 1
        traceback.print_exc()
        raise NotCollected(
            f"stopped on an unexpected {type(e).__name__} (a bug in mprig: please report it"
            " with the traceback above); nothing is complete to archive"
        ) from e


def _collect(args: argparse.Namespace) -> int:
    from collectors.collect import Options, campaign_dirs, collect_campaign
    from mprig.run.bundle import KEPT_MANIFEST

    options = Options(k_block=args.k, bin_s=args.bin_s)  # UsageError on a bad --k or --bin
    problems = 0
    for root in campaign_dirs(args.results):
        if (root / KEPT_MANIFEST).exists():  # its captures are gone: collecting would null it
            print(f"mprig: {root}: an archive (`mprig archive`) is collected once, before it"
                  " is archived; left as it is", file=sys.stderr)  # fmt: skip
            continue
        started = time.monotonic()
        progress = None if args.quiet else _progress(root.name)
        outcome = collect_campaign(root, options, force=args.force, progress=progress)
        for problem in outcome.problems:
            print(f"mprig: {root.name}/{problem}", file=sys.stderr)
        problems += len(outcome.problems)
        seconds = time.monotonic() - started
        print(f"{outcome.parquet}: {len(outcome.runs)} runs, {seconds:.1f} s")
    if problems:
        print(f"mprig: {problems} artifact problem(s); their metrics are null", file=sys.stderr)
    return 1 if problems else 0


def _progress(campaign: str) -> Any:
    last = [time.monotonic()]

    def show(i: int, n: int, outcome: Any) -> None:
        now = time.monotonic()
        how = "current" if outcome.reused else f"{now - last[0]:.1f} s"
        status = outcome.row.get("status")
        print(f"[{i}/{n}] {campaign}/{outcome.run_id}: {status} ({how})", file=sys.stderr)
        last[0] = now

    return show
