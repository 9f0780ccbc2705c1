"""`mprig archive RESULTS DEST`: keep a campaign's collected runs in a form a repository can
hold (reports/archive.py), adding to what DEST already holds."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
examples:
  mprig run experiments/papers/004-fig6a-full.yaml --shard 1/10 --results results/s1
  mprig collect results/s1/004-fig6a-full
  mprig archive results/s1/004-fig6a-full reports/archived-runs/004-fig6a-full
      the shard's complete runs join the archive (created on the first call); commit it.
      A later session runs shard 2/10 and archives it into the same DEST
  mprig reproduce 004 --profile full --results reports/archived-runs --partial \
      --out results/archived-reproductions
      a reproduction from what the archives hold so far, its gaps listed (`make
      paper-shard` and `make reproduce-archived` do these steps: docs/papers.md)
  mprig archive --prune results/s1/004-fig6a-full reports/archived-runs/004-fig6a-full
      the same, then the bundles the archive now holds leave results/s1 with their
      captures (64-71 MB a run at 10-40 m): for a full profile longer than the disk holds
      (`make paper-shard PRUNE=1`, `make paper-full PRUNE=1`)

DEST keeps campaign.json, the rows of runs.parquet and each complete run's run.json (which
records the sha256 of every capture and log left behind), with baseline.json: the sha256 of
each kept file. `mprig report`, `compare` and `reproduce` read DEST as results; a run whose
run.json no longer matches is reported corrupt. Only complete, verified runs are archived;
RESULTS must be collected (`mprig collect`) and be of DEST's campaign, spec and plan. A run
DEST already holds keeps its archived record, unless DEST holds it rig-limited and RESULTS
hold a clean rerun (`mprig run --skip-archived DEST --redo-rig-limited`): that replaces it.
--prune removes a bundle only when DEST holds its very run.json (sha256 compared); its run
leaves RESULTS' runs.parquet and joins campaign.json's `archived_elsewhere`, and a re-collect
of it is no longer possible. `mprig run --skip-archived DEST` into RESULTS goes on.
exit status: 0 archived, 2 refused (not collected, another campaign, DEST unreadable)
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `archive` command."""
    p = subparsers.add_parser(
        "archive",
        help="keep a campaign's complete runs without their captures, in a directory to commit",
        description="Add RESULTS' complete, verified runs to the archive DEST: campaign.json, "
        "runs.parquet rows and run.json per run, with a sha256 manifest.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", type=Path, metavar="RESULTS", help="collected results/<campaign>")
    p.add_argument("dest", type=Path, metavar="DEST", help="the archive (created if missing)")
    p.add_argument(
        "--prune", action="store_true", help="then remove the bundles DEST holds from RESULTS"
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from reports import archive

    done = archive.archive(args.results, args.dest)
    lines = archive.summary(done)
    print(lines[0])
    for line in lines[1:]:
        print(f"mprig: {line}", file=sys.stderr)
    if args.prune:
        print(archive.prune_summary(archive.prune(args.results, args.dest), args.results))
    return 0
