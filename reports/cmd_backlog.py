"""`mprig backlog PAPER`: what a paper's full profile needs before every cell holds K runs,
and with --run, running it into the committed archives (reports/backlog.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mprig.cli.argtypes import bounded_int
from mprig.run.stop_after import parse_duration

EPILOG = """\
examples:
  mprig backlog 004
      per campaign of 004's full profile: the fewest runs a cell of its archive holds and,
      for a campaign short of 5, the runs still to run and their time without KVM
  mprig backlog 000 --run --stop-after 8h
      run them: for each short campaign, `mprig run --shard 1/N --skip-archived
      --redo-rig-limited`, `mprig collect` and `mprig archive` into
      reports/archived-runs/<campaign>/ (commit it); starts no run expected to end after
      8 h, and the same command later goes on
  mprig backlog 003 --run --prune
      the same, each shard's archived bundles removed from results/ after archiving: 003's
      3 069 runs to go would otherwise keep about 200 GB of captures (mprig archive --prune)
  make paper-full PAPER=000 STOP_AFTER=8h
      the same, then, once every cell holds 5, `mprig reproduce 000 --profile full
      --results reports/archived-runs --min-n 5` and docs/papers.md's numbers

Shard 1 of N = repetitions // K holds K repetitions of every cell (000's full profile plans
30: shard 1/6 is 5 of each), so that shard is the backlog. A run the archive holds
rig-limited, failed or not at all is run again.
exit status: 0 every cell holds K runs (with --run: after running), 1 runs to go (with
--run: runs failed, or collect found artifact problems: archived all the same), 2 bad
input, 3 --stop-after ran out with runs left
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `backlog` command."""
    p = subparsers.add_parser(
        "backlog",
        help="what a paper's full profile needs for n >= K per cell; --run runs it",
        description="List, and with --run run, the full-profile runs a paper needs before "
        "every cell (a variant at a sweep point) of its archives holds K complete runs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paper", metavar="PAPER", help="paper id: 000 001 002 003 004")
    p.add_argument("--min-n", type=bounded_int(1, 1000, "runs per cell"), default=5,
                   metavar="K", help="complete runs each cell needs (default: 5)")  # fmt: skip
    p.add_argument("--run", action="store_true", help="run, collect and archive what is left")
    p.add_argument("--stop-after", type=parse_duration, default=None, metavar="DURATION",
                   help="with --run: start no run expected to end after DURATION (90m, 2h, "
                   "1h30m, 5400s)")  # fmt: skip
    p.add_argument("--archives", type=Path, default=None, metavar="DIR",
                   help="where the archives are (default: reports/archived-runs)")  # fmt: skip
    p.add_argument("--prune", action="store_true",
                   help="with --run: archived bundles (captures, 64-71 MB a run) leave the "
                   "shard's results (mprig archive --prune)")  # fmt: skip
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from reports import backlog

    archives = args.archives or backlog.ARCHIVES
    if backlog.committed_full(args.paper):
        print(f"paper {args.paper}: reports/reproductions/{args.paper} is a full reproduction of"
              " every planned run; nothing to run")  # fmt: skip
        return 0
    found = backlog.needs(args.paper, args.min_n, archives)
    for line in backlog.lines(args.paper, args.min_n, found):
        print(line)
    short = any(n.fewest < args.min_n for n in found)
    if not args.run or not short:
        return 1 if short else 0
    status = backlog.run(found, args.min_n, args.stop_after, archives, prune=args.prune)
    after = backlog.needs(args.paper, args.min_n, archives)
    for line in backlog.lines(args.paper, args.min_n, after):
        print(line)
    if status == 0 and any(n.fewest < args.min_n for n in after):
        return 1
    return status
