"""Read a campaign's results directory: campaign.json, runs.parquet and each run's run.json.

The layout is the contract in docs/bundle.md. This is the only module of reports/ that
reads result files; everything downstream works on the `Results` record.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig.errors import UsageError
from mprig.run import bundle
from mprig.run.bundle import rig_limited_reason  # one rule for reports and --redo-rig-limited

if TYPE_CHECKING:
    import pandas as pd

FORMAT = 1  # newest campaign.json / run.json format this reader understands

# runs.parquet columns that identify a run rather than measure it.
ID_COLUMNS = ("campaign", "run_id", "variant", "protocol", "status", "index", "repetition", "seed")


# Status "unplanned": a bundle in the directory whose run campaign.json's plan does not name
# (a run of an earlier spec or plan left there, or copied in). Never averaged in or archived.
UNPLANNED = (
    "not in campaign.json's plan: a run of another spec or plan left in this directory; "
    "move it out (reports and archives leave it out)"
)


@dataclass(frozen=True)
class Results:
    """One campaign's results, as read from disk."""

    root: Path  # the results directory
    name: str  # campaign name
    spec: dict[str, Any]  # the campaign spec snapshot from campaign.json
    planned: tuple[dict[str, Any], ...]  # planned runs: run_id, variant, repetition, point
    runs: pd.DataFrame  # runs.parquet, plus derived columns (link_util)
    bundles: dict[str, dict[str, Any]] = field(default_factory=dict)  # run_id -> run.json
    corrupt: dict[str, str] = field(default_factory=dict)  # run_id -> why (status "corrupt")

    @property
    def axes(self) -> list[str]:
        """Sweep axis columns (`param.<axis>`), in table order, without the axes of a zip
        sweep that repeat an earlier one run for run (both wifi distances swept together)."""
        distinct: list[str] = []
        for column in (c for c in self.runs.columns if c.startswith("param.")):
            if not any(self.runs[column].equals(self.runs[d]) for d in distinct):
                distinct.append(column)
        return distinct

    @property
    def archived(self) -> bool:
        """An archive (`mprig archive`, or another kept copy): a planned run it does not hold
        was not archived yet, which says nothing of whether it ran."""
        return (self.root / BASELINE_MANIFEST).is_file()

    def in_variant_order(self, names: Iterable[Any]) -> list[str]:
        """NAMES (repeats allowed) once each, in the order the campaign lists its variants:
        a table's columns must not depend on the order its runs were collected or merged."""
        variants = self.spec.get("variants") or []
        listed = [str(v.get("name")) for v in variants if isinstance(v, dict)]
        present = dict.fromkeys(str(n) for n in names)
        return [v for v in listed if v in present] + sorted(set(present) - set(listed))

    @property
    def metrics(self) -> list[str]:
        """Metric columns: numeric, neither an id nor a sweep parameter."""
        import pandas as pd

        return [
            c
            for c in self.runs.columns
            if c not in ID_COLUMNS
            and not c.startswith("param.")
            and pd.api.types.is_numeric_dtype(self.runs[c])
        ]

    @property
    def complete(self) -> pd.DataFrame:
        """Rows of runs that completed."""
        return self.runs[self.runs["status"] == "complete"]

    @property
    def failed(self) -> pd.DataFrame:
        """Rows of runs that failed or were interrupted, with their reason."""
        bad = self.runs[self.runs["status"] != "complete"].copy()
        bad["reason"] = [
            self.corrupt.get(r)
            or (UNPLANNED if status == "unplanned" else None)
            or rig_limited_reason(self.bundles.get(r, {}))
            or str(self.bundles.get(r, {}).get("reason", "no reason recorded"))
            for r, status in zip(bad["run_id"], bad["status"], strict=True)
        ]
        return bad

    @property
    def missing(self) -> list[dict[str, Any]]:
        """Planned runs with no row in runs.parquet (a partial campaign)."""
        present = set(self.runs["run_id"])
        return [p for p in self.planned if p["run_id"] not in present]


def load(root: str | Path) -> Results:
    """Read RESULTS/campaign.json, runs.parquet and every run bundle's run.json."""
    import pandas as pd

    root = Path(root)
    campaign = _read_json(root / "campaign.json", what="campaign.json")
    _check_format(campaign, root / "campaign.json")
    parquet = root / "runs.parquet"
    if not parquet.is_file():
        raise UsageError(f"{parquet}: not found; run `mprig collect {root}` first")
    try:
        runs = pd.read_parquet(parquet)
    except (OSError, ValueError) as e:
        raise UsageError(f"{parquet}: unreadable parquet ({e}); run `mprig collect` again") from e
    _check_columns(runs, parquet)
    check_duplicates(root, runs)
    spec = dict(campaign.get("spec") or campaign.get("campaign") or {})
    name = str(spec.get("name") or campaign.get("name") or root.name)
    records, corrupt = _read_bundles(root, runs, bundle.planned(campaign))
    runs = _derive(runs)
    runs.loc[runs["run_id"].isin(list(corrupt)), "status"] = "corrupt"
    planned = tuple(_planned_runs(campaign))
    if planned:  # a bundle the plan does not name measured another spec or plan
        ids = {p["run_id"] for p in planned}
        runs.loc[~runs["run_id"].astype(str).isin(ids), "status"] = "unplanned"
    # A run whose rig was saturated measured the rig: shown with its cause, never averaged in.
    limited = [r for r, rec in records.items() if rig_limited_reason(rec)]
    runs.loc[runs["run_id"].isin(limited) & (runs["status"] == "complete"), "status"] = (
        "rig-limited"
    )
    return Results(
        root=root,
        name=name,
        spec=spec,
        planned=planned,
        runs=runs,
        bundles=records,
        corrupt=corrupt,
    )


def check_duplicates(root: Path, runs: pd.DataFrame) -> None:
    """Two bundles of one run (a copy) or two rows of one run: an error naming both."""
    from collectors.collect import bundle_dirs
    from collectors.collect import check_duplicates as check_bundles

    check_bundles(list(bundle_dirs(root)))
    twice = sorted({str(r) for r in runs["run_id"][runs["run_id"].duplicated()]})
    if twice:
        raise UsageError(
            f"{root / 'runs.parquet'}: runs {', '.join(twice)} appear twice; "
            f"run `mprig collect {root}` again"
        )


def _read_json(path: Path, *, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise UsageError(f"{path}: not found; is this a results directory of `mprig run`?")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{e.lineno}: invalid JSON in {what}: {e.msg}") from e
    if not isinstance(data, dict):
        raise UsageError(f"{path}: {what} must hold a JSON object")
    return data


def _check_format(doc: dict[str, Any], path: Path) -> None:
    version = doc.get("format", FORMAT)
    if not isinstance(version, int) or version > FORMAT:
        raise UsageError(
            f"{path}: format {version!r} is newer than this mprig reads ({FORMAT}); upgrade mprig"
        )


def _check_columns(runs: pd.DataFrame, path: Path) -> None:
    needed = ("run_id", "variant", "status", "repetition")
    absent = [c for c in needed if c not in runs.columns]
    if absent:
        raise UsageError(f"{path}: missing columns {', '.join(absent)}; run `mprig collect` again")


def _planned_runs(campaign: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan from campaign.json, normalised to run_id / variant / repetition / point."""
    plan = campaign.get("plan") or campaign.get("runs") or []
    out = []
    for entry in plan:
        variant = entry.get("variant")
        if isinstance(variant, dict):
            variant = variant.get("name")
        out.append(
            {
                "run_id": str(entry["run_id"]),
                "variant": str(variant),
                "repetition": int(entry.get("repetition", 1)),
                "point": dict(entry.get("point") or {}),
            }
        )
    return out


def _read_bundles(
    root: Path, runs: pd.DataFrame, plan: bundle.Planned | None
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Every run's run.json, and why the runs that runs.parquet calls complete (or collect
    found corrupt) cannot be trusted: run.json unreadable, its artifacts' sha256 no longer
    what it records (a kept baseline, which has no artifacts, is checked against its
    baseline.json), or run.json at odds with itself or PLAN (bundle.record_problem)."""
    manifest = _baseline_manifest(root)
    records: dict[str, dict[str, Any]] = {}
    corrupt: dict[str, str] = {}
    for run_id, status in zip(runs["run_id"], runs["status"], strict=True):
        run_id = str(run_id)
        try:
            records[run_id] = bundle.read_record(root / run_id)
        except ValueError as e:
            if status == "complete" or (root / run_id / "run.json").exists():
                corrupt[run_id] = str(e)
            continue
        if status not in ("complete", "corrupt"):
            continue
        if manifest is not None:
            why = _manifest_problem(root, manifest, f"{run_id}/run.json")
        else:
            verdict = bundle.verify(root / run_id)
            why = None if verdict.ok else f"{root / run_id}: {verdict.reason}"
        if not why and (problem := bundle.record_problem(run_id, records[run_id], plan)):
            why = f"{root / run_id}: {problem}"
        if why:
            corrupt[run_id] = why
    return records, corrupt


BASELINE_MANIFEST = "baseline.json"  # bundle.KEPT_MANIFEST: a kept copy's sha256 table


def _baseline_manifest(root: Path) -> dict[str, str] | None:
    """A kept baseline's sha256 manifest (reports/nightly.py keep_baseline), checked for
    the campaign-wide files; None for ordinary results."""
    path = root / BASELINE_MANIFEST
    if not path.is_file():
        return None
    doc = _read_json(path, what=BASELINE_MANIFEST)
    sums = doc.get("sha256")
    if not isinstance(sums, dict):
        raise UsageError(f"{path}: no sha256 table; set the baseline again")
    for name in ("campaign.json", "runs.parquet"):
        problem = _manifest_problem(root, sums, name)
        if problem:
            raise UsageError(f"{problem}: the baseline is corrupt; set it again")
    return {str(k): str(v) for k, v in sums.items()}


def _manifest_problem(root: Path, sums: dict[str, str], name: str) -> str | None:
    path = root / name
    if name not in sums or not path.is_file():
        return f"{path}: not in {root / BASELINE_MANIFEST}"
    return None if bundle.sha256_file(path) == sums[name] else f"{path}: sha256 differs"


def _derive(runs: pd.DataFrame) -> pd.DataFrame:
    """Add `link_util`: the mean over paths of `link_util.<path>` (the papers' LU); and
    `throughput_bps` where the capture gave none (plain TCP runs: the collector analyses
    MPTCP connections) as the sum of `throughput_bps.<path>`, so gains over TCP and the
    papers' TCP rates can be checked."""
    per_path = [c for c in runs.columns if c.startswith("link_util.")]
    runs = runs.copy()
    if per_path and "link_util" not in runs.columns:
        runs["link_util"] = runs[per_path].mean(axis=1, skipna=True)
    paths_bps = [c for c in runs.columns if c.startswith("throughput_bps.")]
    if paths_bps:
        total = runs[paths_bps].sum(axis=1, min_count=1)
        have = runs["throughput_bps"] if "throughput_bps" in runs.columns else None
        runs["throughput_bps"] = total if have is None else have.fillna(total)
    return runs


def point_label(point: dict[str, Any]) -> str:
    """A short human label for a sweep point: `distance_m=50, loss_pct=0.1`."""
    if not point:
        return "-"
    return ", ".join(f"{short_axis(k)}={fmt_value(v)}" for k, v in point.items())


def short_axis(axis: str) -> str:
    """`param.paths.wifi.distance_m` -> `wifi.distance_m`, `param.variants.rmem` -> `rmem`."""
    name = axis.removeprefix("param.")
    for prefix in ("paths.", "variants."):
        name = name.removeprefix(prefix)
    return name


def fmt_value(value: Any) -> str:
    """A parameter value: 50.0 -> "50", strings as they are."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
