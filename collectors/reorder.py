"""Reordering metrics over the connection-level arrival sequence: RFC 4737 (reordered
ratio, extent, n-reordering) and RFC 5236 (reorder density, reorder buffer-occupancy
density). Pure functions over numpy arrays of non-duplicate arrivals in arrival order.

The byte-stream form of RFC 4737 (its section 4.2) is used: a packet is reordered when its
first byte is below NextExp, the highest end of data seen before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]


@dataclass(frozen=True)
class Rfc4737:
    """RFC 4737 reordering of one arrival sequence."""

    reordered_ratio: float  # reordered packets / packets
    extent_mean: float  # mean reordering extent of the reordered packets, in packets
    extent_max: int  # largest reordering extent, in packets
    n_reordering: dict[int, float]  # n -> fraction of packets that are n-reordered


def rfc4737(starts: U64, lengths: npt.NDArray[np.uint32], max_n: int = 3) -> Rfc4737:
    """RFC 4737 metrics of arrivals with first byte `starts` and size `lengths`."""
    n = len(starts)
    if n == 0:
        return Rfc4737(0.0, 0.0, 0, {k: 0.0 for k in range(1, max_n + 1)})
    ends = starts + lengths.astype(np.uint64)
    next_exp = np.empty(n, dtype=np.uint64)
    next_exp[0] = starts[0]
    next_exp[1:] = np.maximum.accumulate(ends)[:-1]
    reordered = starts < next_exp
    idx = np.flatnonzero(reordered)
    cummax = np.maximum.accumulate(starts)
    first_later = np.searchsorted(cummax, starts[idx], side="right")
    # A chunk that only overlaps the end of an earlier one has no earlier, later-starting
    # packet: extent 0.
    extent = np.maximum(idx - first_later, 0)
    return Rfc4737(
        reordered_ratio=float(len(idx) / n),
        extent_mean=float(extent.mean()) if len(idx) else 0.0,
        extent_max=int(extent.max()) if len(idx) else 0,
        n_reordering={k: _n_reordered(starts, reordered, k) / n for k in range(1, max_n + 1)},
    )


def _n_reordered(starts: U64, reordered: npt.NDArray[np.bool_], k: int) -> int:
    """Packets whose start is below the starts of each of the k packets just before them."""
    ok = reordered.copy()
    ok[:k] = False
    for j in range(1, k + 1):
        ok[k:] &= starts[k:] < starts[k - j : len(starts) - j]
    return int(ok.sum())


@dataclass(frozen=True)
class Rfc5236:
    """RFC 5236 densities (fractions keyed by displacement or occupancy in packets)."""

    reorder_density: dict[int, float]  # displacement D in [-DT, DT] -> fraction
    buffer_occupancy_density: dict[int, float]  # occupancy B in [0, DT] -> fraction


def rfc5236(starts: U64, threshold: int = 8) -> Rfc5236:
    """RFC 5236 RD and RBD, with packets numbered by the rank of their first byte."""
    n = len(starts)
    if n == 0:
        return Rfc5236({}, {})
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(starts, kind="stable")] = np.arange(n)
    displacement = np.arange(n) - rank
    keep = np.abs(displacement) <= threshold
    rd = _density(displacement[keep] + threshold, 2 * threshold + 1, -threshold)
    occupancy = _buffer_occupancy(rank)
    rbd = _density(occupancy[occupancy <= threshold], threshold + 1, 0)
    return Rfc5236(reorder_density=rd, buffer_occupancy_density=rbd)


def _buffer_occupancy(rank: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Packets held in a reorder buffer after each arrival (early ones wait for the gap)."""
    n = len(rank)
    pos = np.empty(n, dtype=np.int64)
    pos[rank] = np.arange(n)
    complete_at = np.maximum.accumulate(pos)  # ordinal o is releasable once all <= o arrived
    released = np.searchsorted(complete_at, np.arange(n), side="right")
    return np.arange(1, n + 1) - released


def _density(values: npt.NDArray[np.int64], size: int, offset: int) -> dict[int, float]:
    counts = np.bincount(values, minlength=size)
    total = counts.sum()
    if total == 0:
        return {}
    return {int(i + offset): float(c / total) for i, c in enumerate(counts) if c}
