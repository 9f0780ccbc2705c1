"""Measure the nightly regression: false alarms on unchanged code, and power on a real drop.

    .venv/bin/python -m bench.nightly_sim [--nights 30] [--trials 200] [--effect 0.15]
    .venv/bin/python -m bench.nightly_sim --record results/smoke DIR ... > runs.csv

Nights are simulated from recorded runs (tests/captures/test_nightly_sim/recorded_runs.csv:
the smoke campaign's MPTCP and TCP-over-Wi-Fi runs of three campaigns run by one commit,
22 runs; `--record` writes such a file from collected results directories). A simulated
night of a variant picks one recorded night (the night-to-night shift the rig showed) and
draws each repetition's value of every metric as that night's mean times one recorded
run's relative deviation from its own night's mean (within-night spread, with its skew and
its correlation across metrics kept: one recorded run is drawn per repetition, all metrics
together). The nights go through `reports.compare.compare` exactly as `mprig nightly`
judges them: Welch tests against the tolerance, Benjamini-Hochberg over all judged rows.

The repetitions per night are the nightly's own rule (`reports.nightly.min_repetitions`)
applied to the recorded spread, at least the campaign's 3. Printed: the false alarms over
NIGHTS unchanged nights (target: at most 1) and the share of TRIALS nights with a real
15 % throughput drop of one variant (every other metric unchanged: the hardest case, one
true change among all rows) that raise that row as a regression (target: at least 90 %).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from reports.results import Results

RECORDED = (
    Path(__file__).resolve().parent.parent / "tests/captures/test_nightly_sim/recorded_runs.csv"
)
VARIANTS = ("mptcp", "tcp_wifi")  # the nightly campaign's variants (experiments/nightly.yaml)
CAMPAIGN_REPETITIONS = 3  # experiments/nightly.yaml: the fewest a night runs
ID = ("night", "variant", "repetition")


@dataclass(frozen=True)
class Measured:
    """What the simulation found."""

    repetitions: int  # per night and variant
    nights: int  # unchanged nights simulated
    false_alarms: int  # of them, nights with at least one regression
    trials: int  # nights with a real drop
    found: int  # of them, nights where the dropped row was a regression
    rows: int  # judged rows per night (the FDR family)
    underpowered: int  # rows per night left out: too few repetitions for their spread

    @property
    def power(self) -> float:
        return self.found / self.trials if self.trials else math.nan


def record(dirs: list[Path]) -> pd.DataFrame:
    """The complete runs of VARIANTS in each results directory, one recorded night each."""
    import pandas as pd

    from reports import results

    frames = []
    for night, d in enumerate(dirs):
        runs = results.load(d).complete
        runs = runs[runs["variant"].isin(VARIANTS)]
        metrics = [c for c in results.load(d).metrics if runs[c].notna().any()]
        frames.append(runs[["variant", "repetition", *metrics]].assign(night=night))
    frame = pd.concat(frames, ignore_index=True)
    return frame[[*ID, *(c for c in frame.columns if c not in ID)]]


def load_recorded(path: Path = RECORDED) -> pd.DataFrame:
    """Recorded runs: night, variant, repetition and metric columns."""
    import pandas as pd

    from mprig.errors import UsageError

    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: unreadable recorded runs ({e})") from e
    absent = [c for c in ID if c not in frame.columns]
    if absent:
        raise UsageError(f"{path}: missing columns {', '.join(absent)}")
    return frame


def metric_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in ID]


def night_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean of every metric per (variant, night)."""
    return frame.groupby(["variant", "night"])[metric_columns(frame)].mean()


def deviations(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's values relative to its night's mean, widened by sqrt(n / (n - 1)) so a
    night of n runs does not shrink the spread (a deviation from a mean of itself and
    n - 1 others is smaller than one from the true mean)."""
    metrics = metric_columns(frame)
    group = frame.groupby(["variant", "night"])[metrics]
    n = group.transform("count")
    rel = frame[metrics] / group.transform("mean") - 1
    return frame[["variant"]].join(rel * np.sqrt(n / (n - 1)).where(n > 1))


def simulate(
    frame: pd.DataFrame, reps: int, rng: np.random.Generator, drop: dict[str, float] | None = None
) -> pd.DataFrame:
    """One night's runs.parquet rows: per variant a recorded night's means times recorded
    relative deviations; DROP scales a `variant.metric` (0.85: a 15 % drop)."""
    import pandas as pd

    means, dev = night_means(frame), deviations(frame)
    metrics = metric_columns(frame)
    parts = []
    for variant in VARIANTS:
        nights = means.loc[variant]
        mean = nights.iloc[int(rng.integers(len(nights)))]
        pool = dev[dev["variant"] == variant][metrics]
        drawn = pool.iloc[rng.integers(len(pool), size=reps)].reset_index(drop=True)
        values = (1 + drawn.fillna(0.0)) * mean
        for metric, factor in (drop or {}).items():
            if metric.startswith(f"{variant}."):
                values[metric.partition(".")[2]] *= factor
        parts.append(values.assign(variant=variant, repetition=range(1, reps + 1)))
    runs = pd.concat(parts, ignore_index=True)
    runs["run_id"] = [f"{v}-r{r}" for v, r in zip(runs["variant"], runs["repetition"], strict=True)]
    return runs.assign(campaign="nightly", status="complete")


def as_results(runs: pd.DataFrame, name: str) -> Results:
    """Simulated runs as the record `mprig compare` reads from disk."""
    from reports.results import Results, _derive

    spec = {"name": "nightly", "repetitions": int(runs["repetition"].max())}
    return Results(Path(name), "nightly", spec, (), _derive(runs))


def measure(
    frame: pd.DataFrame,
    reps: int,
    *,
    nights: int = 30,
    trials: int = 100,
    effect: float = 0.15,
    tolerance: float = 0.05,
    seed: int = 19,
) -> Measured:
    """False alarms over NIGHTS unchanged nights, and how many of TRIALS nights with a drop
    of EFFECT in one variant's throughput find it."""
    from reports import compare

    rng = np.random.default_rng(seed)
    baseline = as_results(simulate(frame, reps, rng), "baseline")
    alarms = found = rows = weak = 0
    for night in range(nights):
        c = compare.compare(baseline, as_results(simulate(frame, reps, rng), f"n{night}"),
                            tolerance, effect)  # fmt: skip
        alarms += bool(c.regressions)
        rows = sum(r.verdict in compare.JUDGED for r in c.rows)
        weak = sum(r.verdict.startswith("underpowered") for r in c.rows)
    for trial in range(trials):
        variant = VARIANTS[trial % len(VARIANTS)]
        drop = {f"{variant}.throughput_bps": 1 - effect}
        cur = as_results(simulate(frame, reps, rng, drop), f"t{trial}")
        c = compare.compare(baseline, cur, tolerance, effect)
        found += any(r.metric == "throughput_bps" and r.variant == variant for r in c.regressions)
    return Measured(reps, nights, alarms, trials, found, rows, weak)


def recorded_spreads(frame: pd.DataFrame, metric: str) -> list[float]:
    """Coefficient of variation of METRIC per recorded (variant, night) of 2 runs or more:
    what the nightly's history holds as `cv_current`."""
    group = frame.groupby(["variant", "night"])[metric]
    cv = (group.std(ddof=1) / group.mean())[group.count() >= 2]
    return [float(v) for v in cv.dropna()]


def repetitions(frame: pd.DataFrame, effect: float, tolerance: float, rows: int) -> int:
    """The nightly's rule on the recorded spread, at least CAMPAIGN_REPETITIONS."""
    from reports.nightly import min_repetitions

    cvs = {m: recorded_spreads(frame, m) for m in ("throughput_bps", "goodput_bps")}
    need = min_repetitions(cvs, effect, tolerance, rows)
    return max(CAMPAIGN_REPETITIONS, need.repetitions or CAMPAIGN_REPETITIONS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.nightly_sim", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--recorded", type=Path, default=RECORDED, help="recorded runs CSV")
    p.add_argument("--nights", type=int, default=30, help="unchanged nights (30)")
    p.add_argument("--trials", type=int, default=200, help="nights with a real drop (200)")
    p.add_argument("--effect", type=float, default=0.15, help="the drop to find (0.15)")
    p.add_argument("--reps", type=int, default=0, help="repetitions (0: the nightly's rule)")
    p.add_argument("--record", type=Path, nargs="+", help="write a recorded-runs CSV to stdout")
    args, _ = p.parse_known_args(argv)
    if args.record:
        record(args.record).to_csv(sys.stdout, index=False)
        return 0
    frame = load_recorded(args.recorded)
    rows = measure(frame, CAMPAIGN_REPETITIONS, nights=1, trials=0).rows
    reps = args.reps or repetitions(frame, args.effect, 0.05, rows)
    m = measure(frame, reps, nights=args.nights, trials=args.trials, effect=args.effect)
    print(report_line(m, args.effect))
    return 0 if m.false_alarms <= 1 and m.power >= 0.9 else 1


def report_line(m: Measured, effect: float) -> str:
    return (
        f"nightly simulation, {m.repetitions} repetitions, {m.rows} judged rows a night "
        f"({m.underpowered} underpowered): "
        f"false alarms {m.false_alarms} in {m.nights} unchanged nights (target <= 1); "
        f"a {effect * 100:g} % throughput drop found in {m.found}/{m.trials} nights, power "
        f"{m.power:.1%} (target >= 90 %)"
    )


if __name__ == "__main__":
    sys.exit(main())
