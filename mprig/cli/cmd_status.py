"""`mprig status`: which planned runs of a campaign's results are complete, failed (with the
reason), interrupted or missing, each bundle verified; and the per-variant summary
`mprig run` prints at the end."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from mprig.errors import UsageError

STATUS_EPILOG = """\
examples:
  mprig status results/smoke       one line per planned run: complete, failed (with the
                                   reason), interrupted or missing; sha256 checked
  mprig status results/smoke --json
"""


def register(subparsers: Any) -> None:
    """Add the `status` command."""
    raw = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "status",
        help="show which runs of a campaign are complete",
        description="Verify every bundle of a results directory against its campaign plan.",
        epilog=STATUS_EPILOG,
        formatter_class=raw,
    )
    p.add_argument("results", metavar="RESULTS", help="a campaign's results directory")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=status)


def load_plan(results: Path) -> list[dict[str, Any]]:
    """The planned runs recorded in campaign.json (a shard's directory: the shard's runs)."""
    path = results / "campaign.json"
    try:
        doc = json.loads(path.read_text())
        plan = list(doc["plan"])
        if isinstance(doc.get("shard"), dict):
            mine = set(doc["shard"]["run_ids"])
            plan = [p for p in plan if p["run_id"] in mine]
        held = set(doc.get("archived_elsewhere") or ())  # mprig run --skip-archived
        plan = [p for p in plan if p["run_id"] not in held]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a campaign results directory ({e})") from None
    return plan


def run_rows(results: Path, planned: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per planned run: id, variant, repetition, status, reason, throughput."""
    from mprig.run import bundle

    try:
        kept = bundle.kept_sums(results)  # an archive: run.json checked against its manifest
    except ValueError as e:
        raise UsageError(str(e)) from None
    rows = []
    for p in planned:
        d = results / p["run_id"]
        verdict = bundle.verify(d, kept)
        record: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            record = bundle.read_record(d) if verdict.status != "missing" else {}
        rows.append(
            {
                "run_id": p["run_id"],
                "variant": _variant_name(p["variant"]),
                "repetition": p["repetition"],
                "status": verdict.status,
                "reason": "" if verdict.ok else _reason(verdict, archive=kept is not None),
                "throughput_bps": (record.get("summary") or {}).get("throughput_bps"),
            }
        )
    return rows


def _reason(verdict: Any, archive: bool) -> str:
    """Why a run is not complete; in an archive a run it does not hold may have run on a
    machine whose results were never archived."""
    return "not archived yet" if archive and verdict.status == "missing" else verdict.reason


def _variant_name(variant: Any) -> str:
    """A plan entry's variant: an object with a name (mprig run), or a name."""
    return str(variant.get("name") if isinstance(variant, dict) else variant)


def status(args: argparse.Namespace) -> int:
    results = Path(args.results)
    rows = run_rows(results, load_plan(results))
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        _print_status(rows)
        held = _archived_elsewhere(results)
        if held:
            print(
                f"{held} more planned runs are archived elsewhere (campaign.json "
                "`archived_elsewhere`: mprig run --skip-archived, mprig archive --prune)"
            )
    return 0 if all(r["status"] == "complete" for r in rows) else 1


def _archived_elsewhere(results: Path) -> int:
    """How many of RESULTS' planned runs an archive holds instead (load_plan leaves them out)."""
    with contextlib.suppress(OSError, ValueError, TypeError):
        return len(
            json.loads((results / "campaign.json").read_text()).get("archived_elsewhere") or ()
        )
    return 0


def _print_status(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("run", "variant", "rep", "status", "reason", box=None)
    for r in rows:
        table.add_row(r["run_id"], r["variant"], str(r["repetition"]), r["status"], r["reason"])
    console = Console(width=200)
    console.print(table)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    console.print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))


NOT_RUN = ("missing", "interrupted")  # redone by the next `mprig run`; not a failure


def summary_rows(rows: list[dict[str, Any]]) -> list[tuple[str, float | None, int, int, int]]:
    """(variant, mean throughput bit/s of complete runs, n complete, failed, not run) per
    variant. A run that never ran, or was interrupted, is not run, not failed: an interrupted
    campaign's summary must not read as 70 failures."""
    out = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        tput = [r["throughput_bps"] for r in mine if r["status"] == "complete"]
        tput = [t for t in tput if t is not None]
        mean = sum(tput) / len(tput) if tput else None
        not_run = sum(r["status"] in NOT_RUN for r in mine)
        failed = sum(r["status"] not in ("complete", *NOT_RUN) for r in mine)
        out.append((variant, mean, len(tput), failed, not_run))
    return out


def print_summary(results: Path, runs: list[Any]) -> None:
    """Where the results are, and mean throughput per variant."""
    from rich.console import Console
    from rich.table import Table

    planned = [
        {"run_id": r.run_id, "variant": {"name": r.variant.name}, "repetition": r.repetition}
        for r in runs
    ]
    table = Table("variant", "mean throughput (Mbit/s)", "n", "failed", "not run", box=None)
    for variant, mean, n, failed, not_run in summary_rows(run_rows(results, planned)):
        mbit = f"{mean / 1e6:.2f}" if mean else "-"
        table.add_row(variant, mbit, str(n), str(failed), str(not_run))
    console = Console()
    console.print(f"results: {results}")
    console.print(table)
