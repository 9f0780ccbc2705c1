"""A reference's verdict from numbers: ours as a mean (or a ratio of means) with its 95 %
interval, and whether that interval lies inside, outside or across the paper's window.
Pure arithmetic; reports/references.py gathers the samples."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

Verdict = Literal[
    "reproduced",
    "contradicted",
    "inconclusive",
    "not comparable",
    "configuration check",
    "uninformative",
]
VERDICTS: tuple[Verdict, ...] = (
    "reproduced",
    "contradicted",
    "inconclusive",
    "uninformative",
    "configuration check",
    "not comparable",
)
NAN = math.nan


class NotComparable(Exception):
    """Why a reference cannot be checked against these results."""


@dataclass(frozen=True)
class Estimate:
    """Ours: a mean (or a ratio of means) with its 95 % interval and effective SD."""

    mean: float
    low: float  # NaN when a side has n < 2
    high: float
    n: int  # repetitions of the conditions side
    n_base: int  # repetitions of the relative_to side (0: none)
    sd: float  # per-repetition SD such that the half-width is t x sd / sqrt(n_eff)

    @property
    def n_eff(self) -> int:
        return min(self.n, self.n_base) if self.n_base else self.n


def estimate(a: np.ndarray, b: np.ndarray | None = None, relation: str = "ratio") -> Estimate:
    """Mean of A with a t interval; with B, the ratio of means (or the gain in %) with a
    delta-method interval on min(n_a, n_b) - 1 degrees of freedom."""
    from reports.stats import mean_ci

    ci = mean_ci(a)
    sd_a = float(np.std(a, ddof=1)) if a.size > 1 else NAN
    if b is None:
        return Estimate(ci.mean, ci.low, ci.high, int(a.size), 0, sd_a)
    mb = float(np.mean(b))
    if mb == 0:
        raise NotComparable("the relative_to side's mean is 0")
    ratio = ci.mean / mb
    n = min(a.size, b.size)
    sd_b = float(np.std(b, ddof=1)) if b.size > 1 else NAN
    se = abs(ratio) * math.sqrt(sd_a**2 / (a.size * ci.mean**2 or NAN) + sd_b**2 / (b.size * mb**2))
    half = _t(n) * se if n > 1 else NAN
    est = Estimate(ratio, ratio - half, ratio + half, int(a.size), int(b.size), se * math.sqrt(n))
    if relation != "gain_pct":
        return est
    return Estimate(
        (ratio - 1) * 100,
        (est.low - 1) * 100,
        (est.high - 1) * 100,
        est.n,
        est.n_base,
        est.sd * 100,
    )


def _t(n: int) -> float:
    from scipy import stats as sps

    return float(sps.t.ppf(0.975, n - 1))


def n_needed(mean: float, window: tuple[float, float], sd: float) -> int | None:
    """The smallest n whose 95 % interval (t x SD / sqrt n) would lie wholly inside or
    wholly outside WINDOW around MEAN; None when no n can (mean on an edge, SD unknown)."""
    lo, hi = window
    if lo <= mean <= hi:
        distance = min(mean - lo, hi - mean)
    else:
        distance = lo - mean if mean < lo else mean - hi
    if not distance > 0 or not sd > 0:
        return None
    for n in range(2, 100_001):
        if _t(n) * sd / math.sqrt(n) < distance:
            return n
    return None


def decide(
    mean: float, low: float, high: float, n: int, window: tuple[float, float], sd: float
) -> tuple[Verdict, int | None]:
    """Reproduced when the interval lies inside the window, contradicted when wholly
    outside, otherwise inconclusive with the n that would decide it."""
    lo, hi = window
    if n < 2 or math.isnan(low) or math.isnan(high) or math.isnan(lo) or math.isnan(hi):
        return "inconclusive", None
    if low >= lo and high <= hi:
        return "reproduced", None
    if high < lo or low > hi:
        return "contradicted", None
    return "inconclusive", n_needed(mean, window, sd)
