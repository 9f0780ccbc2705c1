"""Statistics for reports and regressions: t confidence intervals, a vectorised bootstrap of
the ratio of medians, and the Mann-Whitney U test. Pure functions over arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

LEVEL = 0.95  # confidence level of every interval mprig prints
MIN_N = 3  # fewest values a report gives an interval for: at n = 2, t(0.975, 1) = 12.7
RESAMPLES = 2000  # bootstrap resamples: the 2.5/97.5 % quantiles are stable to ~0.5 % here


@dataclass(frozen=True)
class MeanCI:
    """Mean of repetitions with a two-sided t interval."""

    mean: float
    low: float  # NaN when n < 2
    high: float  # NaN when n < 2
    n: int  # non-null values used

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class RatioCI:
    """Ratio of medians current / baseline with a percentile bootstrap interval."""

    ratio: float  # NaN when the baseline median is 0
    low: float
    high: float


def clean(values: ArrayLike) -> np.ndarray:
    """Values as a float array without NaN."""
    arr = np.asarray(values, dtype=float)
    kept: np.ndarray = arr[~np.isnan(arr)]
    return kept


def mean_ci(values: ArrayLike, level: float = LEVEL) -> MeanCI:
    """Mean and t-distribution confidence interval over repetitions."""
    from scipy import stats

    arr = clean(values)
    n = int(arr.size)
    if n == 0:
        return MeanCI(math.nan, math.nan, math.nan, 0)
    mean = float(arr.mean())
    if n < 2:
        return MeanCI(mean, math.nan, math.nan, 1)
    sem = float(arr.std(ddof=1)) / math.sqrt(n)
    half = float(stats.t.ppf((1 + level) / 2, n - 1)) * sem
    return MeanCI(mean, mean - half, mean + half, n)


@dataclass(frozen=True)
class SummaryCI:
    """Mean of repetitions with the interval a report prints, and how it was made."""

    mean: float
    low: float  # NaN when n < MIN_N
    high: float  # NaN when n < MIN_N
    n: int  # non-null values used
    method: str  # "t", "t, clipped at 0", "n too small" or "no data"

    @property
    def clipped(self) -> bool:
        return self.method.endswith("clipped at 0")


def summary_ci(values: ArrayLike, *, nonnegative: bool = True, level: float = LEVEL) -> SummaryCI:
    """Mean and Student-t interval for a report: none below MIN_N values ("n too small"),
    and for a NONNEGATIVE quantity a lower bound below 0 is clipped to 0 (and says so)."""
    ci = mean_ci(values, level)
    if ci.n == 0:
        return SummaryCI(math.nan, math.nan, math.nan, 0, "no data")
    if ci.n < MIN_N:
        return SummaryCI(ci.mean, math.nan, math.nan, ci.n, "n too small")
    if nonnegative and ci.low < 0:
        return SummaryCI(ci.mean, 0.0, ci.high, ci.n, "t, clipped at 0")
    return SummaryCI(ci.mean, ci.low, ci.high, ci.n, "t")


def bootstrap_ratio(
    baseline: ArrayLike,
    current: ArrayLike,
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> RatioCI:
    """Ratio of medians current / baseline; each sample resampled independently."""
    base, cur = clean(baseline), clean(current)
    if base.size == 0 or cur.size == 0:
        return RatioCI(math.nan, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    base_meds = np.median(base[rng.integers(0, base.size, (resamples, base.size))], axis=1)
    cur_meds = np.median(cur[rng.integers(0, cur.size, (resamples, cur.size))], axis=1)
    point_base = float(np.median(base))
    if point_base == 0 or np.any(base_meds == 0):
        return RatioCI(math.nan, math.nan, math.nan)
    ratios = cur_meds / base_meds
    alpha = (1 - level) / 2
    low, high = np.quantile(ratios, [alpha, 1 - alpha])
    return RatioCI(float(np.median(cur)) / point_base, float(low), float(high))


def mann_whitney_p(baseline: ArrayLike, current: ArrayLike) -> float:
    """Two-sided Mann-Whitney U p-value; 1.0 when both samples are constant and equal."""
    from scipy import stats

    base, cur = clean(baseline), clean(current)
    if base.size == 0 or cur.size == 0:
        return math.nan
    if np.ptp(np.concatenate([base, cur])) == 0:
        return 1.0
    return float(stats.mannwhitneyu(cur, base, alternative="two-sided").pvalue)


def beyond_tolerance_p(
    baseline: ArrayLike, current: ArrayLike, tolerance: float, direction: int
) -> float:
    """One-sided p-value that CURRENT's mean lies beyond TOLERANCE of BASELINE's in the bad
    DIRECTION (1: higher is better, so below (1 - tol) x baseline; -1: above (1 + tol) x
    baseline): Welch's t on current - k x baseline, Satterthwaite degrees of freedom. Under
    no change the margin makes it conservative; 1.0 when it cannot be told."""
    from scipy import stats

    base, cur = clean(baseline), clean(current)
    if base.size < 2 or cur.size < 2 or direction == 0:
        return 1.0
    k = 1 - tolerance if direction > 0 else 1 + tolerance
    diff = float(cur.mean() - k * base.mean()) * (1 if direction < 0 else -1)  # > 0: worse
    vb, vc = k * k * float(base.var(ddof=1)) / base.size, float(cur.var(ddof=1)) / cur.size
    if vb + vc == 0:
        return 0.0 if diff > 0 else 1.0
    df = (vb + vc) ** 2 / (vb**2 / (base.size - 1) + vc**2 / (cur.size - 1))
    return float(stats.t.sf(diff / math.sqrt(vb + vc), df))


def bh_adjust(pvalues: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values) over the non-NaN entries; NaN stays."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.size, math.nan)
    known = np.flatnonzero(~np.isnan(p))
    if known.size == 0:
        return out.tolist()
    order = known[np.argsort(p[known], kind="stable")]
    ranked = p[order] * known.size / np.arange(1, known.size + 1)
    out[order] = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    result: list[float] = out.tolist()
    return result


def needed_repetitions(
    cv: float,
    effect: float,
    tolerance: float,
    *,
    rows: int = 1,
    fdr: float = 0.05,
    power: float = 0.9,
    most: int = 1000,
) -> int | None:
    """Repetitions per side for `beyond_tolerance_p` to find a change of EFFECT (fraction)
    with POWER when its row is one of ROWS held at FDR (the worst case, a single true
    change: its threshold is fdr / rows), given a relative spread CV per repetition. Welch
    t quantiles with 2 (n - 1) degrees of freedom; None when EFFECT is within TOLERANCE
    (never a regression) or more than MOST would be needed."""
    from scipy import stats

    if effect <= tolerance or cv < 0:
        return None
    alpha = fdr / max(rows, 1)
    k = 1 - tolerance
    spread = cv * math.sqrt((1 - effect) ** 2 + k**2)
    for n in range(2, most + 1):
        df = 2 * (n - 1)
        reach = float(stats.t.ppf(1 - alpha, df) + stats.t.ppf(power, df))
        if reach * spread / math.sqrt(n) <= effect - tolerance:
            return n
    return None
