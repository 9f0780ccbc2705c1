"""The `mprig` command line. Each command lives in its own module, which exposes
`register(subparsers)`; this module only wires them together and turns mprig's own errors
into one line on stderr with the right exit status (2 for bad input, 1 otherwise).

Command modules keep their top-level imports light (no pandas, matplotlib or scapy at
import time) so that `mprig validate` answers in well under a second.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from mprig import __version__
from mprig.errors import MprigError, error_lines

# Modules that register subcommands, in the order `mprig --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "mprig.cli.cmd_spec",
    "mprig.cli.cmd_run",
    "mprig.cli.cmd_status",
    "mprig.cli.cmd_merge",
    "mprig.cli.cmd_rig",
    "mprig.cli.doctor",
    "mprig.cli.cmd_probe",
    "collectors.cmd_analyze",
    "collectors.cmd_collect",
    "reports.cmd_report",
    "reports.cmd_reproduce",
    "reports.cmd_archive",
    "reports.cmd_backlog",
    "reports.cmd_compare",
    "reports.cmd_nightly",
)

EPILOG = """\
examples:
  mprig doctor                        what this machine can run, and in which rig mode
  mprig validate experiments/smoke.yaml
  mprig plan experiments/smoke.yaml --commands
  mprig run experiments/smoke.yaml    run the campaign (resumes where it stopped)
  mprig status results/smoke
  mprig merge results/smoke results-a/smoke results-b/smoke   join a campaign's shards
  mprig collect results/smoke && mprig report results/smoke
  mprig compare results/base/nightly results/tonight/nightly
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mprig",
        description="Run MPTCP experiments over Wi-Fi and cellular paths on a lab or virtual rig.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mprig {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except MprigError as e:
        for line in error_lines(e):
            print(f"mprig: error: {line}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("mprig: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `mprig plan ... | head`: the reader went away; say nothing more, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
