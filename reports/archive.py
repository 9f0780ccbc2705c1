"""Archived runs: the part of a campaign's results a repository can keep (`mprig archive`).

A full-profile campaign outlives the machine that runs it: hours to days of runs, on a
machine whose results/ is gone by the next session. An archive keeps what the reports
need and nothing they do not: campaign.json, the collected rows of runs.parquet, and each
complete run's run.json, which records the sha256 of every artifact left behind (pcaps,
iperf3 JSON). Its manifest (baseline.json, the format of a kept nightly baseline) holds the
sha256 of each kept file, so `reports.results.load` reads an archive as it reads results
and marks any run whose run.json no longer matches as corrupt.

An archive accumulates: archiving the results of shard 2/5 into the archive that holds
shard 1/5 adds shard 2's complete runs. Only the runs of one campaign from one spec are
joined (name, spec sha256 and plan compared, as `mprig merge` does); a run the archive
already holds keeps its archived record, unless that record is rig-limited (reports leave
it out) and RESULTS hold a clean rerun of it (`mprig run --redo-rig-limited`). The new
archive is built next to the old one and swapped in by two renames: a crash leaves the old
archive or the new one, never a mix.

With `--prune`, the bundles an archive holds byte for byte leave RESULTS (prune): a full
profile's captures take 64-71 MB a run at 10-40 m (paper 003's 3 069 runs to go: about
200 GB), and once a run's record is archived its captures serve only a re-collect. RESULTS stay a
results directory: those runs leave runs.parquet and join campaign.json's
`archived_elsewhere`, as `mprig run --skip-archived` writes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mprig import fsio
from mprig.errors import UsageError, escape

FORMAT = 1
STAGING = ".{name}.archiving"  # the new archive, built next to DEST
OLD = ".{name}.old"  # the previous archive while the new one is swapped in


@dataclass
class Archived:
    """What one `mprig archive` did."""

    dest: Path
    added: list[str] = field(default_factory=list)  # run ids archived now
    kept: list[str] = field(default_factory=list)  # already archived, kept as they were
    replaced: list[str] = field(default_factory=list)  # archived rig-limited, now a clean rerun
    left_out: dict[str, str] = field(default_factory=dict)  # run id -> why not archived
    planned: int = 0  # runs in the campaign's plan
    archived: int = 0  # runs the archive now holds


def archive(results: Path, dest: Path) -> Archived:
    """Add RESULTS' complete, verified runs to the archive DEST (created if missing)."""
    from reports import results as res

    with fsio.exclusive(dest.parent / f".{dest.name}.archive.lock", f"archive into {dest}"):
        _recover(dest)
        current = res.load(results)  # verifies every bundle; corrupt ones are marked
        old = res.load(dest) if dest.exists() else None
        if old is not None:
            _check_same_campaign(old, current)
            _check_intact(old)
        done = Archived(dest, planned=len(current.planned))
        rows = _choose(current, old, done)
        if old is None or done.added or done.replaced:  # else DEST holds it all: left as is
            _write(dest, current, old, rows, set(done.replaced))
        done.archived = len(rows)
    return done


@dataclass
class Pruned:
    """What `mprig archive --prune` removed from RESULTS."""

    removed: list[str] = field(default_factory=list)  # run ids whose bundles were removed
    freed: int = 0  # bytes


def prune(results: Path, dest: Path) -> Pruned:
    """Remove from RESULTS every run bundle whose run.json is, byte for byte, the one the
    intact archive DEST holds (sha256 compared): its captures and logs go, its record stays
    in DEST. Those runs leave RESULTS' runs.parquet and join campaign.json's
    `archived_elsewhere` before their bundles go, each renamed out of sight and then
    removed, so a crash leaves RESULTS readable and a second call finishes the job."""
    import pandas as pd

    from collectors.collect import bundle_dirs
    from mprig.run.bundle import OLD_SUFFIX, RUN_JSON, kept_sums, sha256_file
    from reports import results as res

    _check_intact(res.load(dest))  # every run.json of DEST matches its manifest
    sums = kept_sums(dest) or {}
    done = Pruned()
    with fsio.results_lock(results, "mprig archive --prune"):
        for bundle in bundle_dirs(results):
            if sums.get(f"{bundle.name}/{RUN_JSON}") == sha256_file(bundle / RUN_JSON):
                done.removed.append(bundle.name)
        if not done.removed:
            return done
        doc = json.loads((results / "campaign.json").read_text())
        before = list(doc.get("archived_elsewhere") or [])
        doc["archived_elsewhere"] = list(dict.fromkeys([*before, *done.removed]))
        fsio.write_json(results / "campaign.json", doc)
        rows = pd.read_parquet(results / "runs.parquet")
        rows = rows[~rows["run_id"].astype(str).isin(set(done.removed))]
        fsio.write_with(results / "runs.parquet", lambda tmp: rows.to_parquet(tmp, index=False))
        for run_id in done.removed:
            gone = results / f".{run_id}{OLD_SUFFIX}"  # mprig run clears one a crash left
            os.rename(results / run_id, gone)
            done.freed += sum(f.stat().st_size for f in gone.rglob("*") if f.is_file())
            shutil.rmtree(gone)
        fsio.fsync_path(results)
    return done


def _choose(current: Any, old: Any, done: Archived) -> Any:
    """The archive's rows: the old archive's, then RESULTS' complete runs it lacks or holds
    only rig-limited."""
    import pandas as pd

    from reports import results as res

    have = set() if old is None else set(old.runs["run_id"].astype(str))
    limited = (
        set()
        if old is None
        else set(old.runs.loc[old.runs["status"] == "rig-limited", "run_id"].astype(str))
    )
    archived = (current.root / res.BASELINE_MANIFEST).exists()  # an archive has no metrics.json
    for run_id, status in zip(current.runs["run_id"], current.runs["status"], strict=True):
        run_id = str(run_id)
        clean_rerun = status == "complete" and run_id in limited
        if status in ("complete", "rig-limited") and run_id in have and not clean_rerun:
            done.kept.append(run_id)
        elif status in ("complete", "rig-limited"):
            stale = None if archived else _not_collected(current.root / run_id)
            if stale:
                done.left_out[run_id] = stale
            else:
                (done.replaced if clean_rerun else done.added).append(run_id)
        elif run_id not in have:
            why = current.corrupt.get(run_id) or (
                res.UNPLANNED if status == "unplanned" else f"status {status}"
            )
            done.left_out[run_id] = why
    new = _raw_rows(current.root, done.added + done.replaced)
    if old is None:
        return new.reset_index(drop=True)
    return pd.concat(
        [_raw_rows(old.root, sorted(have - set(done.replaced))), new], ignore_index=True
    )


def _not_collected(bundle: Path) -> str | None:
    """Why BUNDLE's row of runs.parquet may not be its own: no metrics.json (never
    collected), or one made from another run.json (the run was redone after the collect)."""
    from collectors.collect import METRICS_JSON
    from mprig.run.bundle import RUN_JSON, sha256_file

    try:
        seen = json.loads((bundle / METRICS_JSON).read_text())["inputs"]["sha256"][RUN_JSON]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{METRICS_JSON} missing or unreadable: run `mprig collect` on the results first"
    if seen != sha256_file(bundle / RUN_JSON):
        return "the run was redone after it was collected: run `mprig collect` again"
    return None


def _raw_rows(root: Path, run_ids: list[str]) -> Any:
    """runs.parquet's own rows (not the derived columns of Results.runs) for RUN_IDS."""
    import pandas as pd

    rows = pd.read_parquet(root / "runs.parquet")
    return rows[rows["run_id"].astype(str).isin(set(run_ids))]


def _check_intact(old: Any) -> None:
    """UsageError naming an archived run whose run.json no longer matches the manifest:
    archiving again would write a new manifest over the edit, and launder it."""
    if old.corrupt:
        run_id, why = next(iter(old.corrupt.items()))
        more = f" (and {len(old.corrupt) - 1} more)" if len(old.corrupt) > 1 else ""
        raise UsageError(
            f"{escape(str(old.root))}: archived run {escape(run_id)} is corrupt{more}: {why};"
            " restore the archive (git checkout -- DIR) before adding to it"
        )


def _check_same_campaign(old: Any, current: Any) -> None:
    """UsageError unless RESULTS are a run of the archive's campaign, spec and plan."""
    from mprig.run import merge

    a = merge.read_source(old.root)
    b = merge.read_source(current.root)
    try:
        merge.check_same_campaign([a, b])
    except UsageError as e:
        raise UsageError(f"{e}; archive them into a directory of their own") from None


def _write(dest: Path, current: Any, old: Any, rows: Any, replaced: set[str]) -> None:
    """Build the archive in a staging directory, verify it by loading it, swap it in; the
    REPLACED runs' records come from RESULTS, not the old archive."""
    from mprig.run.bundle import sha256_file
    from reports import results as res

    staging = dest.parent / STAGING.format(name=dest.name)
    if staging.exists():
        shutil.rmtree(staging)  # a crashed archive's copy: DEST is as it was
    staging.mkdir(parents=True)
    try:
        base = old if old is not None else current
        doc = json.loads((base.root / "campaign.json").read_text())
        doc.pop("shard", None)
        doc.pop("archived_elsewhere", None)
        sources = list(doc.get("archived_from") or [])
        sources.append(_source_entry(current))
        doc["archived_from"] = sources
        fsio.write_json(staging / "campaign.json", doc)
        fsio.write_with(staging / "runs.parquet", lambda tmp: rows.to_parquet(tmp, index=False))
        names = ["campaign.json", "runs.parquet"]
        for run_id in rows["run_id"].astype(str):
            mine = old is not None and run_id in old.bundles and run_id not in replaced
            src = old.root if mine else current.root
            (staging / run_id).mkdir()
            fsio.write_bytes(
                staging / run_id / "run.json", (src / run_id / "run.json").read_bytes()
            )
            names.append(f"{run_id}/run.json")
        sums = {name: sha256_file(staging / name) for name in names}
        fsio.write_json(staging / res.BASELINE_MANIFEST, {"format": FORMAT, "sha256": sums})
        fsio.fsync_path(staging)
        res.load(staging)  # what was written reads back, every run verified by its sha256
        _swap(staging, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise


def _source_entry(current: Any) -> dict[str, Any]:
    doc = json.loads((current.root / "campaign.json").read_text())
    shard = doc.get("shard")
    return {
        "results": str(current.root.resolve()),
        "shard": f"{shard['index']}/{shard['count']}" if isinstance(shard, dict) else "whole plan",
    }


def _swap(staging: Path, dest: Path) -> None:
    """DEST becomes STAGING: DEST -> OLD, STAGING -> DEST, OLD removed."""
    old = dest.parent / OLD.format(name=dest.name)
    if dest.exists():
        os.rename(dest, old)
    os.rename(staging, dest)
    fsio.fsync_path(dest.parent)
    if old.exists():
        shutil.rmtree(old)


def _recover(dest: Path) -> None:
    """A crash between the two renames of _swap left DEST missing and OLD whole: restore."""
    old = dest.parent / OLD.format(name=dest.name)
    if old.exists() and not dest.exists():
        os.rename(old, dest)
    elif old.exists():
        shutil.rmtree(old)


def summary(done: Archived) -> list[str]:
    """The lines `mprig archive` prints."""
    lines = [
        f"{escape(str(done.dest))}: {done.archived} of {done.planned} planned runs archived"
        f" ({len(done.added)} added now,{_replaced(done)} {len(done.kept)} already there)"
    ]
    lines += [f"not archived: {run_id}: {why}" for run_id, why in done.left_out.items()]
    return lines


def prune_summary(done: Pruned, results: Path) -> str:
    """The line `mprig archive --prune` prints."""
    n = len(done.removed)
    if not n:
        return f"{escape(str(results))}: nothing to prune (no bundle the archive holds as is)"
    runs = "run's bundle" if n == 1 else "runs' bundles"
    return (
        f"{escape(str(results))}: {n} archived {runs} removed, {done.freed / 1e9:.2f} GB freed"
        " (their records stay in the archive; run with --skip-archived to go on)"
    )


def _replaced(done: Archived) -> str:
    n = len(done.replaced)
    if not n:
        return ""
    return f" {n} rig-limited {'run' if n == 1 else 'runs'} replaced by a clean rerun,"
