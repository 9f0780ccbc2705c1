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
TREND_METRICS = ("goodput_bps", "throughput_bps", "ooo_ratio", "link_util")
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
    from mprig.spec import load_campaign

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
    from mprig.bundle import sha256_file
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
        "results": str(results),
    }


def append_history(history: Path, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Append ROWS to HISTORY/history.parquet (a rerun of the same night replaces it)."""
    import pandas as pd

    history.mkdir(parents=True, exist_ok=True)
    path = history / HISTORY_FILE
    new = pd.DataFrame(rows)
    if path.is_file():
        old = pd.read_parquet(path)
        nights = set(new["date"]) if len(new) else set()
        old = old[~old["date"].isin(nights)]
        new = pd.concat([old, new], ignore_index=True) if len(old) else new
    new = new.sort_values(["date", "metric", "variant", "point"], kind="stable", ignore_index=True)
    fsio.write_with(path, lambda tmp: new.to_parquet(tmp, index=False))
    return new


def trend_figure(history: pd.DataFrame, out: Path) -> Path | None:
    """Median of each headline metric per night and (variant, point); the baseline dashed."""
    from matplotlib.figure import Figure

    shown = [m for m in TREND_METRICS if (history["metric"] == m).any()]
    if not shown:
        return None
    ncols = min(2, len(shown))
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


def prune(results_root: Path, keep: int) -> list[Path]:
    """Delete all but the KEEP newest night directories (named YYYY-MM-DD)."""
    nights = sorted(p for p in results_root.iterdir() if p.is_dir() and NIGHT.match(p.name))
    doomed = nights[:-keep] if keep > 0 else []
    for path in doomed:
        shutil.rmtree(path)
    return doomed


def judge_night(date: str, current: Results, baseline: Path, tolerance: float) -> Comparison:
    """Compare CURRENT with BASELINE and write compare outputs next to tonight's results."""
    from reports import compare, results
    from reports.cmd_compare import write

    comparison = compare.compare(results.load(baseline), current, tolerance)
    write(comparison, current.root / "compare", ["md", "json", "html"])
    return comparison


def nightly(
    date: str,
    results_dir: Path,
    baseline: Path,
    history: Path,
    tolerance: float = 0.05,
) -> Night:
    """Report, compare and record one night whose collected results are in RESULTS_DIR."""
    from reports import compare, report, results

    try:
        current = results.load(results_dir)
        report.write_report(current, results_dir / "report", ["html", "md"])
        if not (baseline / "campaign.json").is_file():
            compare.check_usable(current, "tonight's")  # never a broken night as baseline
            keep_baseline(results_dir, baseline)
            return Night(date, results_dir, f"nightly {date}: BASELINE set to {baseline}", 0)
        comparison = judge_night(date, current, baseline, tolerance)
    except MprigError as e:
        append_history(history, [error_row(date, results_dir.name, str(e), results_dir)])
        log = results_dir.parent / "nightly.log"
        hint = f" (run log: {log})" if log.is_file() else ""
        return Night(date, results_dir, f"nightly {date}: ERROR {e}{hint}", 2)
    frame = append_history(history, history_rows(date, comparison))
    trend_figure(frame, history)
    line = f"nightly {date}: {compare.summary_line(comparison)}"
    return Night(date, results_dir, line, comparison.exit_code)
