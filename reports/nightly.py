"""The nightly regression: run and collect a campaign, report it, compare it with the
baseline, append the comparison to a history parquet, draw the trend over nights, and
reduce it all to one verdict line and an exit status (0 ok, 1 regression, 2 error).

Layout it maintains:
  RESULTS_ROOT/<date>/<campaign>/      tonight's results, report/ and compare/ inside
  RESULTS_ROOT/<date>/nightly.log      output of `mprig run` and `mprig collect`
  HISTORY/history.parquet              one row per metric, variant and sweep point per night
  HISTORY/trend.png, trend.svg         medians over nights
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig import fsio
from mprig.errors import MprigError, UsageError

if TYPE_CHECKING:
    import pandas as pd

    from reports.compare import Comparison
    from reports.results import Results

HISTORY_FILE = "history.parquet"
NIGHT = re.compile(r"^\d{4}-\d{2}-\d{2}$")  # night directories: what --keep may delete
TREND_METRICS = ("goodput_bps", "throughput_bps", "ooo_ratio", "link_util")  # drawn first
# Files a baseline keeps: what compare reads (no pcaps).
BASELINE_FILES = ("campaign.json", "runs.parquet")


@dataclass(frozen=True)
class Night:
    """What one night produced."""

    date: str
    results: Path  # RESULTS_ROOT/<date>/<campaign>
    verdict: str  # the one line
    exit_code: int


def campaign_name(campaign_file: Path) -> str:
    from mprig.campaign.spec import load_campaign

    return str(load_campaign(str(campaign_file)).name)


def commands(
    campaign_file: Path, night_root: Path, results: Path, rig: str | None = None
) -> list[list[str]]:
    """The argv of `mprig run` and `mprig collect` for one night."""
    cli = [sys.executable, "-m", "mprig.cli"]
    run = [*cli, "run", str(campaign_file), "--results", str(night_root), "--quiet"]
    return [run + (["--rig", rig] if rig else []), [*cli, "collect", str(results), "--quiet"]]


def run_and_collect(
    campaign_file: Path, night_root: Path, log: Path, rig: str | None = None
) -> Path:
    """`mprig run` then `mprig collect`, as subprocesses (the runner may boot a VM);
    their output goes to LOG. Returns the campaign's results directory."""
    name = campaign_name(campaign_file)
    results = night_root / name
    cli = [sys.executable, "-m", "mprig.cli"]
    night_root.mkdir(parents=True, exist_ok=True)
    for argv in (
        [
            *cli,
            "run",
            str(campaign_file),
            "--results",
            str(night_root),
            "--quiet",
            *(["--rig", rig] if rig else []),
        ],
        [*cli, "collect", str(results), "--quiet"],
    ):
        # Captured, then logged: a VM's console may reopen an inherited log file and
        # overwrite it from the start.
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        with log.open("a") as out:
            out.write(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}[exit {done.returncode}]\n")
        # `mprig run` exits non-zero when runs failed: they are reported, not fatal.
        if done.returncode == 2 or not (results / "campaign.json").is_file():
            raise UsageError(f"{argv[3]} failed with status {done.returncode}; see {log}")
    return results


def keep_baseline(results: Path, baseline: Path) -> None:
    """Copy what compare needs (campaign.json, runs.parquet, run.json files) to BASELINE,
    with baseline.json: their sha256, which stand in for the artifacts left behind."""
    from mprig.run.bundle import sha256_file
    from reports.results import BASELINE_MANIFEST

    baseline.mkdir(parents=True, exist_ok=True)
    names = list(BASELINE_FILES)
    for name in BASELINE_FILES:
        fsio.write_bytes(baseline / name, (results / name).read_bytes())
    for run_json in sorted(results.glob("*/run.json")):
        (baseline / run_json.parent.name).mkdir(exist_ok=True)
        name = f"{run_json.parent.name}/run.json"
        fsio.write_bytes(baseline / name, run_json.read_bytes())
        names.append(name)
    sums = {name: sha256_file(baseline / name) for name in names}
    fsio.write_json(baseline / BASELINE_MANIFEST, {"format": 1, "sha256": sums})


def history_rows(date: str, comparison: Comparison) -> list[dict[str, Any]]:
    """One history row per compared metric, variant and sweep point."""
    from reports.results import point_label

    return [
        {
            "date": date,
            "campaign": comparison.campaign,
            "metric": r.metric,
            "variant": r.variant,
            "point": point_label(r.point),
            "n_baseline": r.n_baseline,
            "n_current": r.n_current,
            "median_baseline": r.median_baseline,
            "median_current": r.median_current,
            "ratio": r.ratio,
            "low": r.low,
            "high": r.high,
            "p_value": r.p_value,
            "q_value": r.q_value,
            "verdict": r.verdict,
            "cv_baseline": r.cv_baseline,
            "cv_current": r.cv_current,
            "results": comparison.current,
        }
        for r in comparison.rows
    ]


def error_row(date: str, campaign: str, message: str, results: Path) -> dict[str, Any]:
    """A night that could not be compared still leaves a row, so the trend shows the gap."""
    nan = float("nan")
    return {
        "date": date,
        "campaign": campaign,
        "metric": "",
        "variant": "",
        "point": "",
        "n_baseline": 0,
        "n_current": 0,
        "median_baseline": nan,
        "median_current": nan,
        "ratio": nan,
        "low": nan,
        "high": nan,
        "p_value": nan,
        "q_value": nan,
        "verdict": f"error: {message}",
        "cv_baseline": nan,
        "cv_current": nan,
        "results": str(results),
    }


def read_history(history: Path) -> pd.DataFrame | None:
    """HISTORY/history.parquet, or None before the first night; UsageError naming it."""
    import pandas as pd

    path = history / HISTORY_FILE
    if not path.is_file():
        return None
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: unreadable history ({e}); move it aside to start anew") from e


def append_history(history: Path, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Append ROWS to HISTORY/history.parquet (a rerun of the same night replaces it)."""
    import pandas as pd

    history.mkdir(parents=True, exist_ok=True)
    path = history / HISTORY_FILE
    new = pd.DataFrame(rows)
    old = read_history(history)
    if old is not None:
        nights = set(new["date"]) if len(new) else set()
        old = old[~old["date"].isin(nights)]
        new = pd.concat([old, new], ignore_index=True) if len(old) else new
    new = new.sort_values(["date", "metric", "variant", "point"], kind="stable", ignore_index=True)
    fsio.write_with(path, lambda tmp: new.to_parquet(tmp, index=False))
    return new


def trend_figure(history: pd.DataFrame, out: Path) -> Path | None:
    """Median of every metric per night and (variant, point), the headline metrics first;
    the baseline dashed, regressions crossed."""
    from matplotlib.figure import Figure

    shown = trend_metrics(history)
    if not shown:
        return None
    ncols = min(3, len(shown))
    nrows = -(-len(shown) // ncols)
    fig = Figure(figsize=(6.4 * ncols, 3.8 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).flatten()
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    for ax, metric in zip(axes, shown, strict=False):
        part = history[history["metric"] == metric]
        for (variant, point), g in part.groupby(["variant", "point"], sort=True):
            label = f"{variant} {point}" if point != "-" else str(variant)
            line = ax.plot(g["date"], g["median_current"], marker="o", label=label)[0]
            ax.plot(g["date"], g["median_baseline"], linestyle="--", color=line.get_color())
            bad = g[g["verdict"] == "regression"]
            ax.scatter(bad["date"], bad["median_current"], marker="x", s=80, color="red", zorder=3)
        ax.set_title(f"{metric} (median; dashed: baseline; x: regression)", fontsize="small")
        ax.tick_params(axis="x", labelrotation=45)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    out.mkdir(parents=True, exist_ok=True)
    fsio.write_with(out / "trend.png", lambda tmp: fig.savefig(tmp, format="png", dpi=90))
    fsio.write_with(
        out / "trend.svg", lambda tmp: fig.savefig(tmp, format="svg", metadata={"Date": None})
    )
    return out / "trend.png"


@dataclass(frozen=True)
class Needed:
    """The fewest repetitions per night that find a change of `effect` with 90 % power."""

    repetitions: int | None  # None: no history yet, or more than 1000 needed
    metric: str  # the metric that needs the most
    cv: float  # its pooled run-to-run spread (coefficient of variation)
    samples: int  # (night, variant, point) spreads it was pooled from


def min_repetitions(
    spreads: dict[str, list[float]], effect: float, tolerance: float, rows: int
) -> Needed:
    """Repetitions per side for each metric of SPREADS (per-night coefficients of
    variation, pooled: `compare.pooled_cv`) to find a change of EFFECT with 90 % power
    among ROWS judged rows at the comparison's FDR. The metric that needs the most decides."""
    from reports.compare import pooled_cv
    from reports.stats import needed_repetitions

    worst = Needed(None, "", math.nan, 0)
    for metric, cvs in sorted(spreads.items()):
        cv = pooled_cv(cvs)
        if math.isnan(cv):
            continue
        n = needed_repetitions(cv, effect, tolerance, rows=rows)
        if worst.samples == 0 or (n or 10**9) > (worst.repetitions or 10**9):
            worst = Needed(n, metric, cv, sum(not math.isnan(v) for v in cvs))
    return worst


def history_spreads(history: pd.DataFrame | None) -> dict[tuple[str, str], list[float]]:
    """(metric, variant) -> the run-to-run spread of every recorded night (`cv_current`)."""
    if history is None or "cv_current" not in history.columns:
        return {}
    kept = history.dropna(subset=["cv_current"])
    return {
        (str(m), str(v)): g["cv_current"].astype(float).tolist()
        for (m, v), g in kept.groupby(["metric", "variant"], sort=True)
    }


def repetitions_warning(
    comparison: Comparison, history: dict[tuple[str, str], list[float]], effect: float
) -> str:
    """`; WARNING: 3 repetitions, 5 needed ...` when tonight's n is below what the history's
    spread (and tonight's) of the POWER_METRICS needs to find a change of EFFECT; else ""."""
    from reports.compare import JUDGED, POWER_METRICS

    spreads: dict[str, list[float]] = {}
    for (metric, _variant), cvs in history.items():
        if metric in POWER_METRICS:
            spreads.setdefault(metric, []).extend(cvs)
    for r in comparison.rows:
        if r.metric in POWER_METRICS:
            spreads.setdefault(r.metric, []).append(r.cv_current)
    rows = sum(r.verdict in JUDGED for r in comparison.rows)
    need = min_repetitions(spreads, effect, comparison.tolerance, max(rows, 1))
    have = min((r.n_current for r in comparison.rows), default=0)
    if not need.samples or (need.repetitions is not None and have >= need.repetitions):
        return ""
    shown = need.repetitions or "more than 1000"
    return (
        f"; WARNING: {have} repetitions, {shown} needed to find a {effect * 100:g} % change "
        f"({need.metric} spread {need.cv * 100:.1f} % over {need.samples} nights and points)"
    )


def trend_metrics(history: pd.DataFrame) -> list[str]:
    """Every metric of the history (error rows have none): TREND_METRICS first."""
    present = sorted({str(m) for m in history["metric"] if m})
    return [m for m in TREND_METRICS if m in present] + [
        m for m in present if m not in TREND_METRICS
    ]


def prune(results_root: Path, keep: int) -> list[Path]:
    """Delete all but the KEEP newest night directories (named YYYY-MM-DD)."""
    nights = sorted(p for p in results_root.iterdir() if p.is_dir() and NIGHT.match(p.name))
    doomed = nights[:-keep] if keep > 0 else []
    for path in doomed:
        shutil.rmtree(path)
    return doomed


def judge_night(
    current: Results,
    baseline: Path,
    tolerance: float,
    effect: float,
    history: dict[tuple[str, str], list[float]],
) -> Comparison:
    """Compare CURRENT with BASELINE and write compare outputs next to tonight's results."""
    from reports import compare, results
    from reports.cmd_compare import write

    comparison = compare.compare(results.load(baseline), current, tolerance, effect, history)
    write(comparison, current.root / "compare", ["md", "json", "html"])
    return comparison


def nightly(
    date: str,
    results_dir: Path,
    baseline: Path,
    history: Path,
    tolerance: float = 0.05,
    effect: float = 0.15,
) -> Night:
    """Report, compare and record one night whose collected results are in RESULTS_DIR;
    EFFECT is the change the night must find (sizes the repetitions it needs)."""
    from reports import compare_checks, compare_render, report, results

    spreads = history_spreads(read_history(history))
    try:
        current = results.load(results_dir)
        report.write_report(current, results_dir / "report", ["html", "md"])
        if not (baseline / "campaign.json").is_file():
            compare_checks.check_usable(current, "tonight's")  # never a broken night as baseline
            keep_baseline(results_dir, baseline)
            return Night(date, results_dir, f"nightly {date}: BASELINE set to {baseline}", 0)
        comparison = judge_night(current, baseline, tolerance, effect, spreads)
    except MprigError as e:
        append_history(history, [error_row(date, results_dir.name, str(e), results_dir)])
        log = results_dir.parent / "nightly.log"
        hint = f" (run log: {log})" if log.is_file() else ""
        return Night(date, results_dir, f"nightly {date}: ERROR {e}{hint}", 2)
    frame = append_history(history, history_rows(date, comparison))
    trend_figure(frame, history)
    warning = repetitions_warning(comparison, spreads, effect)
    line = f"nightly {date}: {compare_render.summary_line(comparison)}{warning}"
    return Night(date, results_dir, line, comparison.exit_code)
