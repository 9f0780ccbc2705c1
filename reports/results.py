"""Read a campaign's results directory: campaign.json, runs.parquet and each run's run.json.

The layout is the contract in docs/bundle.md. This is the only module of reports/ that
reads result files; everything downstream works on the `Results` record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

FORMAT = 1  # newest campaign.json / run.json format this reader understands

# runs.parquet columns that identify a run rather than measure it.
ID_COLUMNS = ("campaign", "run_id", "variant", "protocol", "status", "index", "repetition", "seed")


@dataclass(frozen=True)
class Results:
    """One campaign's results, as read from disk."""

    root: Path  # the results directory
    name: str  # campaign name
    spec: dict[str, Any]  # the campaign spec snapshot from campaign.json
    planned: tuple[dict[str, Any], ...]  # planned runs: run_id, variant, repetition, point
    runs: pd.DataFrame  # runs.parquet, plus derived columns (link_util)
    bundles: dict[str, dict[str, Any]] = field(default_factory=dict)  # run_id -> run.json

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
            str(self.bundles.get(r, {}).get("reason", "no reason recorded")) for r in bad["run_id"]
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
    spec = dict(campaign.get("spec") or campaign.get("campaign") or {})
    name = str(spec.get("name") or campaign.get("name") or root.name)
    return Results(
        root=root,
        name=name,
        spec=spec,
        planned=tuple(_planned_runs(campaign)),
        runs=_derive(runs),
        bundles=_read_bundles(root, list(runs["run_id"])),
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


def _read_bundles(root: Path, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    bundles = {}
    for run_id in run_ids:
        path = root / str(run_id) / "run.json"
        if path.is_file():
            doc = _read_json(path, what="run.json")
            _check_format(doc, path)
            bundles[str(run_id)] = doc
    return bundles


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
