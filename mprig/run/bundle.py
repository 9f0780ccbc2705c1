"""Run bundles: written in `.<run-id>.partial/`, renamed into place, verified on resume.

See docs/bundle.md (layout) and docs/running.md (run.json keys). A bundle is complete when
its run.json says `status: complete` (and no failure reason: record_problem) and every
artifact it lists has the recorded sha256; files it does not list (written later by `mprig
collect`) are allowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mprig import fsio
from mprig.safeio import NotRegularFile, open_regular

FORMAT = 1  # run.json format this mprig writes and reads
RUN_JSON = "run.json"
CAMPAIGN_JSON = "campaign.json"
# A kept copy of results (`mprig archive`, a nightly baseline) holds run.json without the
# artifacts, and this manifest: {"sha256": {relative path: digest}} of every file it keeps.
KEPT_MANIFEST = "baseline.json"
PARTIAL_SUFFIX = ".partial"
OLD_SUFFIX = ".old"


def partial_dir(results: Path, run_id: str) -> Path:
    """Where a run's bundle is assembled before the rename."""
    return results / f".{run_id}{PARTIAL_SUFFIX}"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open_regular(path, "artifact") as f:  # a FIFO would block: refused unopened
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# A file's sha256 taken as it was written: (size, mtime_ns, sha256) of the file then.
Stamp = tuple[int, int, str]


def copy_hashed(src: Path, dst: Path) -> Stamp:
    """Copy src to dst and hash the bytes written, a thread hashing while the copy writes
    (in VM mode dst is on the host's file system: hashing it at the commit read it back
    over 9p, about 3 s for a run's 70 MB of captures under emulation); dst's stamp."""
    h = hashlib.sha256()
    blocks: queue.Queue[bytes | None] = queue.Queue(4)

    def hash_blocks() -> None:
        while (block := blocks.get()) is not None:
            h.update(block)

    hasher = threading.Thread(target=hash_blocks, name="copy_hashed", daemon=True)
    hasher.start()
    try:
        with open(src, "rb") as f, open(dst, "wb") as out:
            for block in iter(lambda: f.read(1 << 20), b""):
                blocks.put(block)
                out.write(block)
    finally:
        blocks.put(None)
        hasher.join()
    st = os.stat(dst)
    return st.st_size, st.st_mtime_ns, h.hexdigest()


def artifact_hashes(directory: Path, known: Mapping[str, Stamp] | None = None) -> dict[str, str]:
    """File name -> sha256 of every file in a bundle directory except run.json; a file in
    `known` whose size and mtime are still those of its stamp takes the stamp's sha256
    (it was hashed as it was written), every other file is read and hashed."""
    known = known or {}
    out = {}
    for p in sorted(directory.iterdir()):
        if not p.is_file() or p.name == RUN_JSON:
            continue
        stamp = known.get(p.name)  # a stat only for a stamped file (over 9p each one costs)
        if stamp is not None and stamp[:2] == ((st := p.stat()).st_size, st.st_mtime_ns):
            out[p.name] = stamp[2]
        else:
            out[p.name] = sha256_file(p)
    return out


def write_json(path: Path, doc: Any) -> None:
    """Write JSON durably: a temporary file, fsync, rename (mprig/fsio.py)."""
    fsio.write_json(path, doc)


def commit(
    results: Path, run_id: str, record: dict[str, Any], known: Mapping[str, Stamp] | None = None
) -> Path:
    """Hash the staged artifacts into `record` (those in `known` hashed as they were
    written, artifact_hashes), write run.json and rename the staging directory to
    `<results>/<run-id>` (replacing an earlier failed or forced bundle)."""
    staging = partial_dir(results, run_id)
    record = {**record, "format": FORMAT, "artifacts": artifact_hashes(staging, known)}
    write_json(staging / RUN_JSON, record)
    fsio.fsync_path(staging)
    final = results / run_id
    old = results / f".{run_id}{OLD_SUFFIX}"
    if final.exists():
        if old.exists():
            shutil.rmtree(old)
        final.rename(old)
    staging.rename(final)
    fsio.fsync_path(results)
    if old.exists():
        shutil.rmtree(old)
    return final


@dataclass(frozen=True)
class Verdict:
    """Whether a bundle is complete and intact, and if not why."""

    ok: bool
    reason: str  # "complete" when ok; else what is wrong (missing, failed: ..., sha256 ...)
    status: str  # run.json status, or "missing" / "corrupt"


def read_record(bundle: Path) -> dict[str, Any]:
    """A bundle's run.json; ValueError when unreadable or of a newer format."""
    try:
        with open_regular(bundle / RUN_JSON, "run.json") as f:  # never blocks on a FIFO
            doc = json.loads(f.read().decode())
    except NotRegularFile as e:
        raise ValueError(str(e)) from None
    except OSError as e:
        raise ValueError(f"{bundle / RUN_JSON}: unreadable ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{bundle / RUN_JSON}: not UTF-8 text (byte {e.start})") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{bundle / RUN_JSON}: unreadable ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{bundle / RUN_JSON}: not a JSON object")
    fmt = doc.get("format")
    if isinstance(fmt, bool) or not isinstance(fmt, int):
        raise ValueError(f"{bundle / RUN_JSON}: format must be a whole number, got {fmt!r}")
    if fmt > FORMAT:
        raise ValueError(f"{bundle / RUN_JSON}: format {fmt} is newer than {FORMAT}; upgrade")
    return doc


def verify(bundle: Path, kept: dict[str, str] | None = None) -> Verdict:
    """Check a bundle: run.json readable, status complete, every artifact's sha256. In a
    kept copy (KEPT, its manifest's sha256 table: `mprig archive`) the artifacts were left
    behind: run.json, which vouches for them, must be the one the manifest records."""
    name = f"{bundle.name}/{RUN_JSON}"
    if not (bundle / RUN_JSON).exists():
        return Verdict(False, "missing", "missing")
    if kept is not None and kept.get(name) != sha256_file(bundle / RUN_JSON):
        return Verdict(False, f"{name}: sha256 differs from {KEPT_MANIFEST}", "corrupt")
    try:
        doc = read_record(bundle)
    except ValueError as e:
        return Verdict(False, str(e), "corrupt")
    status = str(doc.get("status"))
    if status != "complete":
        return Verdict(False, f"{status}: {doc.get('reason', 'no reason recorded')}", status)
    problem = record_problem(bundle.name, doc, None)
    if problem is None and kept is None:
        problem = _artifact_problem(bundle, doc.get("artifacts"))
    if problem:
        return Verdict(False, problem, "corrupt")
    return Verdict(True, "complete", "complete")


def campaign_doc(file: str, campaign: Any, plan: list[Any]) -> dict[str, Any]:
    """campaign.json's campaign-wide part: the spec FILE as parsed (CAMPAIGN) and the
    whole PLAN (`mprig run` adds a shard's run ids)."""
    from mprig import __version__
    from mprig.campaign.plan import run_json

    return {
        "format": FORMAT,
        "campaign": campaign.name,
        "spec_file": str(Path(file).resolve()),
        "spec": campaign.model_dump(mode="json"),
        "plan": [run_json(r) for r in plan],
        "mprig": {"version": __version__},
    }


def kept_sums(results: Path) -> dict[str, str] | None:
    """A kept copy's sha256 table; None for results with their artifacts. ValueError naming
    the manifest when it is unreadable."""
    path = results / KEPT_MANIFEST
    if not path.is_file():
        return None
    try:
        sums = json.loads(path.read_text())["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: unreadable sha256 manifest ({e})") from None
    if not isinstance(sums, dict):
        raise ValueError(f"{path}: no sha256 table in it")
    return {str(k): str(v) for k, v in sums.items()}


@dataclass(frozen=True)
class Planned:
    """What a results directory's campaign.json says its runs are: the campaign's name and
    each planned run (run id -> its plan entry: repetition, point, variant, paths, ...)."""

    campaign: str | None
    runs: dict[str, dict[str, Any]]


def planned(doc: Any) -> Planned | None:
    """campaign.json's DOC as Planned; None without a plan in it."""
    plan = doc.get("plan") if isinstance(doc, dict) else None
    if not isinstance(plan, list):
        return None
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    name = doc.get("campaign") or spec.get("name")
    runs = {str(e["run_id"]): e for e in plan if isinstance(e, dict) and "run_id" in e}
    return Planned(str(name) if name else None, runs)


def read_planned(results: Path) -> Planned | None:
    """RESULTS/campaign.json as Planned; None when there is none (or it is unreadable:
    the readers that need it say so)."""
    try:
        return planned(json.loads((results / CAMPAIGN_JSON).read_text()))
    except (OSError, ValueError):
        return None


def record_problem(name: str, record: dict[str, Any], plan: Planned | None) -> str | None:
    """Why the run.json of bundle directory NAME cannot be the record of the run it claims,
    or None. Its artifacts' sha256 do not cover run.json itself: a record edited after the
    run (a failed run made complete, moved to another variant, cell, rate or run id) or
    copied from another run is caught where it disagrees with itself or with PLAN."""
    why = _record_why(name, record, plan)
    return None if why is None else f"run.json {why}; {RECORD_FIX}"


RECORD_FIX = "restore the bundle, or remove it and run it again"
_PLANNED_KEYS = ("repetition", "point", "variant", "paths", "traffic")  # in the run id's hash


def _record_why(name: str, record: dict[str, Any], plan: Planned | None) -> str | None:
    if record.get("status") == "complete" and record.get("reason"):
        return f"status complete with a failure reason ({record['reason']})"
    if plan is None:
        return None
    run_id = record.get("run_id")
    if run_id is not None and str(run_id) != name:
        return f"run_id {run_id!r} is not its directory's name ({name})"
    campaign = record.get("campaign")
    if plan.campaign and campaign is not None and campaign != plan.campaign:
        return f"campaign {campaign!r} differs from campaign.json's ({plan.campaign!r})"
    entry = plan.runs.get(name) or {}  # a run the plan does not name: reports say unplanned
    for key in _PLANNED_KEYS:
        if key in entry and key in record and (d := _differ(key, record[key], entry[key])):
            return f"{d[0]} {d[1]!r} differs from campaign.json's plan ({d[2]!r})"
    return None


def _differ(where: str, got: Any, want: Any) -> tuple[str, Any, Any] | None:
    """The first value GOT records otherwise than WANT plans: keys either side lacks, or
    holds null, are left alone (a field added to the spec since: unset either way)."""
    if got is None or want is None:
        return None
    if isinstance(want, str) and isinstance(got, dict):  # a plan naming its variant only
        return _differ(f"{where}.name", got.get("name"), want)
    if isinstance(want, dict) and isinstance(got, dict):
        diffs = (_differ(f"{where}.{k}", got[k], v) for k, v in want.items() if k in got)
        return next((d for d in diffs if d), None)
    if isinstance(want, list) and isinstance(got, list) and _named(want) and _named(got):
        mine = {g["name"]: g for g in got}
        diffs = (_differ(f"{where}.{w['name']}", mine.get(w["name"]), w) for w in want)
        return next((d for d in diffs if d), None)
    return None if got == want else (where, got, want)


def _named(items: list[Any]) -> bool:
    return all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in items)


def _artifact_problem(bundle: Path, artifacts: Any) -> str | None:
    if not isinstance(artifacts, dict) or not artifacts:
        return "run.json lists no artifacts"
    for name, digest in artifacts.items():
        path = bundle / name
        if not path.is_file():
            return f"artifact {name} is missing"
        if sha256_file(path) != digest:
            return f"artifact {name}: sha256 differs from run.json"
    return None


@dataclass(frozen=True)
class Decision:
    """What the runner does with one planned run."""

    action: str  # "skip" (verified complete) or "run"
    reason: str  # why: complete, missing, force, failed: ..., sha256 ...


def decide(results: Path, run_id: str, *, force: bool, redo_rig_limited: bool = False) -> Decision:
    """Skip a run whose bundle verifies; redo missing, partial, failed, corrupt ones, and
    with redo_rig_limited the complete runs that measured the rig (rig_limited_reason)."""
    if force:
        return Decision("run", "force")
    if redo_rig_limited and (why := _recorded_rig_limited(results / run_id)):
        return Decision("run", why)  # redone whatever its hashes say: not hashed first
    verdict = verify(results / run_id)
    if verdict.ok:
        return Decision("skip", "complete")
    if verdict.status == "missing" and partial_dir(results, run_id).exists():
        return Decision("run", "partial")
    return Decision("run", verdict.reason)


def _recorded_rig_limited(bundle: Path) -> str | None:
    """rig_limited_reason of a complete run's run.json; None without a readable one."""
    try:
        record = read_record(bundle)
    except ValueError:
        return None
    return rig_limited_reason(record) if record.get("status") == "complete" else None


def rig_limited_reason(record: dict[str, Any]) -> str | None:
    """Why a complete run measured its rig rather than MPTCP, or None: the rig's CPU was
    saturated (run.json `rig_cpu`, flag `rig_limited`), or its ns-3 link engine fell behind
    real time (`engine`, flag `not_realtime`). Reports leave such a run out, and
    `--redo-rig-limited` runs it again: both ask this one function."""
    if (lag := not_realtime_reason(record)) is not None:
        return lag
    cpu = record.get("rig_cpu")
    flagged = "rig_limited" in (record.get("flags") or [])
    if not isinstance(cpu, dict) or not (flagged or cpu.get("rig_limited") is True):
        return None
    return f"rig-limited: {cpu.get('cause') or 'CPU saturated during the traffic'}"


def not_realtime_reason(record: dict[str, Any]) -> str | None:
    """`rig-limited: not real-time: ...` for a run whose ns-3 engine lagged, or None."""
    engine = record.get("engine")
    if "not_realtime" not in (record.get("flags") or []) or not isinstance(engine, dict):
        return None
    limits = engine.get("limits") or {}
    p95, peak = _ms(engine.get("lag_p95_ms")), _ms(engine.get("lag_max_ms"))
    limit_p95, limit_max = _ms(limits.get("lag_p95_ms")), _ms(limits.get("lag_max_ms"))
    return (
        f"rig-limited: not real-time: ns-3 lag p95 {p95} ms, max {peak} ms "
        f"(limits {limit_p95} ms, {limit_max} ms)"
    )


def _ms(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else "?"


def clean_leftovers(results: Path) -> list[str]:
    """Remove staging and replaced directories left by a campaign that stopped mid-run
    (SIGTERM in VM mode stops the guest mid-run, kill -9, a crash); return their names."""
    removed = []
    for p in sorted(results.glob(".*")):
        if p.is_dir() and p.name.endswith((PARTIAL_SUFFIX, OLD_SUFFIX)):
            shutil.rmtree(p)
            removed.append(p.name)
    return removed
