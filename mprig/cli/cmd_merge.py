"""`mprig merge`: join the results directories of a campaign's shards into one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EPILOG = """\
examples:
  mprig run experiments/smoke.yaml --shard 1/2 --rig a --results results-a
  mprig run experiments/smoke.yaml --shard 2/2 --rig b --results results-b
  mprig merge results/smoke results-a/smoke results-b/smoke
      one directory with every run; `mprig status results/smoke`, collect and report as
      for an unsharded campaign (merge.json in it says which shard gave each run)
  ansible-playbook -i shards.yml playbooks/shards.yml -e shards_campaign=experiments/x.yaml
      run the shards on N rigs in parallel, fetch them and merge (docs/lab.md)

OUT must not exist. Each DIR is a campaign results directory (results/<campaign>) of the
same campaign from the same spec (campaign.json compared: name, spec sha256 without
rig.inventory, plan). Every bundle's sha256 is verified; a run found complete in two DIRs
is taken once if both bundles are identical, and the merge is refused (nothing written)
when they differ; corrupt, failed and partial bundles are left out and named.
exit status: 0 every planned run merged, 1 some planned run has no complete bundle (OUT
is written; `mprig run` on it redoes them), 2 refused (different campaigns, two different
bundles of one run, OUT exists)
"""


def register(subparsers: Any) -> None:
    """Add the `merge` command."""
    p = subparsers.add_parser(
        "merge",
        help="join the results of a campaign's shards (mprig run --shard) into one",
        description="Join the results directories of one campaign's shards into OUT, "
        "verifying every bundle and naming duplicate and missing runs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out", metavar="OUT", help="the merged results directory (must not exist)")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="a shard's campaign results directory")
    p.set_defaults(func=merge)


def merge(args: argparse.Namespace) -> int:
    from mprig.run import merge as m

    out = Path(args.out)
    choice = m.merge(out, [Path(d) for d in args.dirs])
    for note in choice.notes:
        print(f"mprig: {note}", file=sys.stderr)
    for run_id, why in choice.missing.items():
        print(f"mprig: missing: {run_id}: {why}", file=sys.stderr)
    total = len(choice.picks) + len(choice.missing)
    print(f"merged {len(choice.picks)} of {total} planned runs from {len(args.dirs)} "
          f"directories into {out}")  # fmt: skip
    return 1 if choice.missing else 0
