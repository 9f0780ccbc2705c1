"""`mprig validate` and `mprig plan`: check campaign files and show their expanded runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from mprig.campaign.plan import Run, run_json
from mprig.errors import MprigError, SpecError, error_lines, escape
from mprig.rig import vmshares
from mprig.rig.layout import DEFAULT_RIG
from mprig.run.judge import plan_file, run_time_checks

if TYPE_CHECKING:
    from mprig.rig.host import PathLink


VALIDATE_EPILOG = """\
examples:
  mprig validate experiments/smoke.yaml
      OK experiments/smoke.yaml: 6 runs
  mprig validate experiments/*.yaml experiments/papers/*.yaml
      check many files; exit status 2 if any is invalid
  an invalid file prints one line naming file:line, the field and what is allowed:
      mprig: error: bad.yaml:9: paths.cell.down.delay_ms: must be greater than or equal
      to 0, got -40 (allowed: >= 0 and <= 10000)
"""

PLAN_EPILOG = """\
examples:
  mprig plan experiments/smoke.yaml              the run table: index, run id, repetition,
                                                 seed, variant, every sweep parameter
  mprig plan experiments/smoke.yaml --json       every run with all its parameters, as JSON
  mprig plan experiments/smoke.yaml --commands   the exact commands each run applies on each
                                                 host (virtual rig, or the campaign's lab
                                                 inventory), one `host: command` per line
  mprig plan experiments/smoke.yaml --json | jq -r '.[].run_id'
"""


def register(subparsers: Any) -> None:
    """Add the `validate` and `plan` commands."""
    raw = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "validate",
        help="check campaign files",
        description="Check campaign files: schema, ranges, references, sweep axes, plan size.",
        epilog=VALIDATE_EPILOG,
        formatter_class=raw,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="campaign YAML files")
    p.set_defaults(func=validate)
    p = subparsers.add_parser(
        "plan",
        help="show the runs a campaign expands to",
        description="Expand a campaign (sweep x variants x repetitions) into its ordered runs.",
        epilog=PLAN_EPILOG,
        formatter_class=raw,
    )
    p.add_argument("file", metavar="FILE", help="campaign YAML file")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the runs as JSON")
    out.add_argument(
        "--commands",
        action="store_true",
        help="print every command each run applies, as `host: command`",
    )
    p.add_argument(
        "--rig",
        default=DEFAULT_RIG,
        metavar="NAME",
        help=f"virtual rig name used in remote paths (default {DEFAULT_RIG}, as `mprig run`)",
    )
    p.add_argument(
        "--inventory",
        default=None,
        metavar="PATH",
        help="lab inventory for --commands, instead of the campaign's rig.inventory (which"
        " must lie under inventory/); may lie anywhere",
    )
    p.set_defaults(func=plan)


def validate(args: argparse.Namespace) -> int:
    """Print `OK <file>: N runs` and what is left to the rig per valid file, and every
    error of an invalid one (one line each): the checks `mprig run` makes before it starts."""
    status = 0
    for name in args.files:
        try:
            campaign, runs = plan_file(name)
        except SpecError as e:
            for line in error_lines(e):
                print(f"mprig: error: {line}", file=sys.stderr)
            status = e.exit_code
            continue
        for line in campaign.deprecations:  # old spellings, accepted (spec_spelling.py)
            print(f"mprig: warning: {line}", file=sys.stderr)
        if campaign.rig.inventory == "virtual":  # `mprig run --vm` refuses what it cannot share
            try:
                vmshares.shares_for([os.path.abspath(name), *campaign.input_files()])
            except MprigError as e:
                print(f"mprig: warning: {e} (when it runs in a VM)", file=sys.stderr)
        print(f"OK {escape(name)}: {len(runs)} run{'s' if len(runs) != 1 else ''}")
        print(f"  checked at run time: {'; '.join(run_time_checks(campaign, runs))}")
    return status


def plan(args: argparse.Namespace) -> int:
    campaign, runs = plan_file(args.file)
    try:
        _print_plan(args, runs, args.inventory or campaign.rig.inventory, args.inventory)
    except BrokenPipeError:  # `mprig plan X | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _print_plan(
    args: argparse.Namespace, runs: list[Run], inventory: str, explicit: str | None
) -> None:
    if args.json:
        json.dump([run_json(r) for r in runs], sys.stdout, indent=1)
        print()
    elif args.commands:
        print_commands(runs, inventory, args.rig, explicit=explicit is not None)
    else:
        print_table(runs)


def table_rows(runs: list[Run]) -> list[list[str]]:
    """Header and one row per run: index, run id, repetition, seed, variant, sweep values."""
    axes = list(runs[0].point) if runs else []
    rows = [["index", "run_id", "rep", "seed", "variant", *axes]]
    for r in runs:
        values = [_cell(r.point[a]) for a in axes]
        rows.append(
            [str(r.index), r.run_id, str(r.repetition), str(r.seed), r.variant.name, *values]
        )
    return rows


def _cell(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def print_table(runs: list[Run]) -> None:
    rows = table_rows(runs)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(f"{len(runs)} runs")


def print_commands(runs: list[Run], inventory: str, rig: str, *, explicit: bool = False) -> None:
    """Per run, a `# run` header, then `host: command` for every command it applies."""
    import shlex

    from mprig.run import commands

    links, server_addr = rig_links(runs, inventory, explicit=explicit)
    for run in runs:
        print(f"# run {run.index} {run.run_id}")
        for host, argv in commands.for_run(run, links, server_addr=server_addr, rig=rig):
            print(f"{host}: {shlex.join(argv)}")


def rig_links(
    runs: list[Run], inventory: str, *, explicit: bool = False
) -> tuple[tuple[PathLink, ...], str]:
    """Where the campaign's paths live, and the server address: the virtual rig's layout,
    or the `mprig_paths` of a lab inventory (read with ansible-inventory, nothing changed)."""
    if inventory == "virtual":
        from mprig.rig.layout import SERVER_ADDR, layout

        return (layout(runs[0].paths) if runs else ()), SERVER_ADDR
    from pathlib import Path

    from mprig.errors import UsageError
    from mprig.rig.host import PathLink
    from mprig.rig.inventory import load_inventory

    data = load_inventory(Path(inventory), explicit=explicit)
    hostvars = data.get("_meta", {}).get("hostvars", {})
    first: dict[str, Any] = next(iter(hostvars.values()), {})
    if "mprig_paths" not in first or "mprig_server_addr" not in first:
        raise UsageError(f"{inventory}: mprig_paths and mprig_server_addr must be set")
    links = tuple(PathLink(**p) for p in first["mprig_paths"])
    return links, str(first["mprig_server_addr"])
