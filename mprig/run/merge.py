"""Join the results directories of one campaign's shards into one (`mprig merge`).

Each source is a campaign results directory (campaign.json and run bundles) written by
`mprig run --shard I/N` on some rig. The merge refuses sources of different campaigns
(campaign name, spec or plan differ), and a run with two different verified bundles; it
takes one verified bundle per planned run, leaves out corrupt, failed and partial ones
(saying why), and names the planned runs no source has. Sources are only read. The output
is assembled in a staging directory next to it, every bundle verified again there, then
renamed into place: a crash leaves the sources as they were and no half-merged OUT.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mprig import fsio
from mprig.errors import UsageError, escape
from mprig.run import bundle

MERGE_JSON = "merge.json"  # what the merge took from where, kept in OUT
STAGING = ".{name}.merging"  # OUT's staging directory, next to it


class MergeRefused(UsageError):
    """The sources cannot be merged as they are (nothing was written)."""


@dataclass(frozen=True)
class Source:
    """One shard's results directory."""

    directory: Path
    doc: dict[str, Any]  # its campaign.json

    @property
    def shard(self) -> str:
        s = self.doc.get("shard")
        return f"{s['index']}/{s['count']}" if isinstance(s, dict) else "whole plan"


@dataclass
class Choice:
    """Which bundle each planned run gets, and what was left out."""

    picks: dict[str, Path] = field(default_factory=dict)  # run id -> the bundle taken
    notes: list[str] = field(default_factory=list)  # duplicates and bundles left out
    missing: dict[str, str] = field(default_factory=dict)  # run id -> why no bundle


def read_source(directory: Path) -> Source:
    """A source directory's campaign.json; UsageError naming the file when unusable."""
    path = directory / bundle.CAMPAIGN_JSON
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{escape(str(path))}: not a campaign results directory ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("plan"), list):
        raise UsageError(f"{escape(str(path))}: no plan in it (not written by mprig run)")
    fmt = doc.get("format")
    if not isinstance(fmt, int) or fmt > bundle.FORMAT:
        raise UsageError(f"{escape(str(path))}: format {fmt!r} is not one this mprig reads")
    return Source(directory, doc)


def spec_sha256(doc: dict[str, Any]) -> str:
    """sha256 of the campaign's spec as parsed, without `rig.inventory` (shards run on
    different rigs by design: each bundle's run.json names its rig) and without the keys
    whose value is null (a spec field added since a campaign.json was written is null in a
    new one and absent from the old: unset either way, the same campaign)."""
    spec = _without_nulls(doc.get("spec", {}))
    if isinstance(spec, dict) and isinstance(spec.get("rig"), dict):
        spec["rig"].pop("inventory", None)
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def plan_ids(doc: dict[str, Any]) -> list[str]:
    return [str(p.get("run_id")) for p in doc["plan"] if isinstance(p, dict)]


def check_same_campaign(sources: list[Source]) -> None:
    """MergeRefused naming the first source that differs from the first, and in what."""
    first = sources[0]
    for other in sources[1:]:
        problems = []
        if other.doc.get("campaign") != first.doc.get("campaign"):
            problems.append(
                f"campaign {other.doc.get('campaign')!r}, not {first.doc.get('campaign')!r}"
            )
        if spec_sha256(other.doc) != spec_sha256(first.doc):
            problems.append(
                f"spec sha256 {spec_sha256(other.doc)[:12]}, not {spec_sha256(first.doc)[:12]}"
            )
        if plan_ids(other.doc) != plan_ids(first.doc):
            problems.append("a different plan (run ids)")
        if problems:
            raise MergeRefused(
                f"{escape(str(other.directory))} is not the campaign of "
                f"{escape(str(first.directory))}: {'; '.join(problems)}; merge only the shards"
                " of one campaign run from one spec"
            )


def archived_runs(archive: Path, doc: dict[str, Any], among: list[str]) -> set[str]:
    """Those of AMONG (planned run ids) that ARCHIVE (`mprig archive`) holds complete and
    intact; UsageError when it is not an archive of the campaign, spec and plan of DOC (a
    campaign.json). Only the bundles the archive has are read: one directory listing, not a
    look for each planned run (in the campaign VM each look crosses 9p: the archive check
    of a 2700-run plan took 60 s there)."""
    source = read_source(archive)
    try:
        sums = bundle.kept_sums(archive)
    except ValueError as e:
        raise UsageError(escape(str(e))) from None
    if sums is None:
        raise UsageError(
            f"{escape(str(archive))}: not an archive (no {bundle.KEPT_MANIFEST}); name the"
            " directory `mprig archive` writes"
        )
    check_same_campaign([Source(Path(str(doc.get("spec_file", "the campaign"))), doc), source])
    with os.scandir(archive) as entries:
        present = {e.name for e in entries if e.is_dir()}
    return {r for r in among if r in present and bundle.verify(archive / r, sums).ok}


def held_runs(
    archive: Path, doc: dict[str, Any], run_ids: list[str], part: str, redo_rig_limited: bool
) -> tuple[list[str], str]:
    """Those of RUN_IDS (of PART, e.g. " of shard 2/15") that ARCHIVE holds, and a line
    saying so for `mprig run --skip-archived`. With REDO_RIG_LIMITED an archived run that
    measured its rig is not held: reports leave it out, so it is run again, and `mprig
    archive` swaps the clean rerun in."""
    held = archived_runs(archive, doc, run_ids)
    mine = [r for r in run_ids if r in held]
    again = []
    if redo_rig_limited:
        again = [r for r in mine if bundle.rig_limited_reason(bundle.read_record(archive / r))]
        mine = [r for r in mine if r not in again]
    if len(mine) == len(run_ids):
        return mine, f"every planned run{part} is archived in {archive}; nothing to run"
    say = f"{len(mine)} planned runs{part} are archived in {archive}; left out"
    if again:
        runs = "run is" if len(again) == 1 else "runs are"
        say += f"; {len(again)} archived rig-limited {runs} run again (--redo-rig-limited)"
    return mine, say


def choose(sources: list[Source]) -> Choice:
    """One verified bundle per planned run; MergeRefused on two different verified bundles
    of one run (nothing is written then)."""
    choice = Choice()
    for run_id in plan_ids(sources[0].doc):
        found = [s.directory / run_id for s in sources if (s.directory / run_id).is_dir()]
        good: list[tuple[Path, str]] = []
        bad: list[tuple[Path, str]] = []
        for b in found:
            verdict = bundle.verify(b)
            (good if verdict.ok else bad).append((b, verdict.reason))
        _pick(choice, run_id, [b for b, _ in good], bad)
    return choice


def _pick(choice: Choice, run_id: str, good: list[Path], bad: list[tuple[Path, str]]) -> None:
    if good:
        digests = {b: bundle.sha256_file(b / bundle.RUN_JSON) for b in good}
        if len(set(digests.values())) > 1:
            shown = " and ".join(escape(str(b)) for b in good)
            raise MergeRefused(
                f"run {escape(run_id)} has two different complete bundles: {shown}; remove"
                " the one you do not want from its directory and merge again"
            )
        choice.picks[run_id] = good[0]
        for b in good[1:]:
            choice.notes.append(f"duplicate: {run_id}: {b} is identical to {good[0]}; kept one")
    for b, reason in bad:
        kept = f"kept {good[0]}" if good else "no verified bundle"
        choice.notes.append(f"left out: {b}: {reason} ({kept})")
    if not good:
        why = "; ".join(f"{b.parent}: {reason}" for b, reason in bad)
        choice.missing[run_id] = why or "in no source"


def merge(out: Path, directories: list[Path]) -> Choice:
    """Merge the source directories into OUT (which must not exist); the choice made."""
    sources = [read_source(d) for d in directories]
    check_same_campaign(sources)
    if out.exists():
        raise MergeRefused(
            f"{escape(str(out))} exists; merge writes a new directory (name another, or remove it)"
        )
    resolved = {d.resolve() for d in directories}
    if len(resolved) != len(directories):
        raise MergeRefused("a source directory is named twice")
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = out.parent / f".{out.name}.merge.lock"
    with fsio.exclusive(lock, f"merge into {out}"):
        choice = choose(sources)
        write(out, sources, choice)
    return choice


def write(out: Path, sources: list[Source], choice: Choice) -> None:
    """Copy (hard-link where possible) the chosen bundles into a staging directory, write
    campaign.json and merge.json, verify every bundle there, then rename it to OUT."""
    staging = out.parent / STAGING.format(name=out.name)
    if staging.exists():
        shutil.rmtree(staging)  # a crashed merge's copies: the sources still have them
    staging.mkdir()
    try:
        for run_id, src in choice.picks.items():
            _copy_bundle(src, staging / run_id)
            verdict = bundle.verify(staging / run_id)
            if not verdict.ok:
                raise UsageError(f"{src}: copying it into {out} failed: {verdict.reason}")
        doc = {k: v for k, v in sources[0].doc.items() if k != "shard"}
        doc["merged_from"] = [str(s.directory.resolve()) for s in sources]
        fsio.write_json(staging / bundle.CAMPAIGN_JSON, doc)
        fsio.write_json(staging / MERGE_JSON, merge_record(sources, choice))
        fsio.fsync_path(staging)
        staging.rename(out)
        fsio.fsync_path(out.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise


def merge_record(sources: list[Source], choice: Choice) -> dict[str, Any]:
    """merge.json: the sources (with their shards), the bundle taken per run, the notes."""
    return {
        "format": 1,
        "sources": [{"results": str(s.directory.resolve()), "shard": s.shard} for s in sources],
        "runs": {run_id: str(src.parent.resolve()) for run_id, src in choice.picks.items()},
        "notes": choice.notes,
        "missing": choice.missing,
    }


def _copy_bundle(src: Path, dst: Path) -> None:
    """A bundle's files (not its subdirectories' staging leftovers), linked or copied,
    each fsynced, then the directory."""
    dst.mkdir()
    for f in sorted(src.iterdir()):
        if not f.is_file() or f.is_symlink():
            continue
        target = dst / f.name
        try:
            os.link(f, target)
        except OSError:
            shutil.copy2(f, target)
        fsio.fsync_path(target)
    fsio.fsync_path(dst)
