"""Capture metrics as pure functions over the replay's event arrays (numpy in, numbers
out). Definitions and units are documented in docs/metrics.md."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]


def rate_bps(nbytes: int, duration_s: float) -> float | None:
    """Bits per second over a duration; None when the duration is zero."""
    return nbytes * 8 / duration_s if duration_s > 0 else None


def ratio(numerator: int, denominator: int) -> float:
    """A fraction that is 0.0 when there is nothing to divide."""
    return numerator / denominator if denominator else 0.0


def time_weighted_mean(t: F64, level: npt.NDArray[np.generic], t_end: float) -> float:
    """Mean of a step function that takes `level[i]` from `t[i]` until the next step."""
    if len(t) == 0 or t_end <= t[0]:
        return 0.0
    widths = np.diff(np.append(t, t_end))
    return float(np.dot(widths, level.astype(np.float64)) / (t_end - t[0]))


def bin_index(t: F64, t0: float, bin_s: float, nbins: int) -> npt.NDArray[np.int64]:
    """The bin of each time, clipped into [0, nbins)."""
    idx = np.floor((t - t0) / bin_s).astype(np.int64)
    return np.clip(idx, 0, nbins - 1)


def nbins_for(t0: float, t_end: float, bin_s: float) -> int:
    """Bins of width bin_s needed to cover [t0, t_end] (at least one)."""
    return max(1, int(np.floor((t_end - t0) / bin_s)) + 1)


def binned_rate_bps(
    t: F64, nbytes: npt.NDArray[np.generic], t0: float, bin_s: float, nbins: int
) -> F64:
    """Bits per second in each bin of width bin_s starting at t0."""
    sums = np.bincount(
        bin_index(t, t0, bin_s, nbins), weights=nbytes.astype(np.float64), minlength=nbins
    )
    return np.asarray(sums * 8 / bin_s, dtype=np.float64)


def binned_level_max(
    t: F64, level: npt.NDArray[np.generic], t0: float, bin_s: float, nbins: int
) -> F64:
    """Largest value a step function takes within each bin (carried into empty bins)."""
    out = np.zeros(nbins, dtype=np.float64)
    if len(t) == 0:
        return out
    values = level.astype(np.float64)
    np.maximum.at(out, bin_index(t, t0, bin_s, nbins), values)
    starts = t0 + np.arange(nbins) * bin_s
    before = np.searchsorted(t, starts, side="left") - 1
    carried = np.where(before >= 0, values[np.maximum(before, 0)], 0.0)
    return np.maximum(out, carried)


def k_blocks(dlv_pkts: U64, dlv_bytes: U64, ooo_bytes: U64, k: int) -> tuple[U64, U64]:
    """Blocks of k contiguous packets: the arrival completing each, and the receive buffer
    (bytes) needed to complete it.

    The application reads only whole blocks: in-order data waits in the buffer until k
    packets are contiguous, then every complete packet is read. The buffer needed for a block
    is the largest sum of unread in-order bytes and out-of-order bytes from the arrival after
    the previous read up to the arrival that completes the block (seed 001, section IV).
    """
    n = len(dlv_pkts)
    if n == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
    # After a read at arrival i the reader waits for dlv_pkts[i] + k: the next block ends at
    # the first arrival reaching that. Only this pointer chase is a Python loop (per block).
    step = np.searchsorted(dlv_pkts, dlv_pkts + np.uint64(k), side="left")
    done = int(np.searchsorted(dlv_pkts, np.uint64(k), side="left"))
    ends: list[int] = []
    while done < n:
        ends.append(done)
        done = int(step[done])
    if not ends:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
    end_idx = np.asarray(ends, dtype=np.int64)
    starts = np.concatenate([[0], end_idx[:-1] + 1])
    held = (dlv_bytes + ooo_bytes)[: end_idx[-1] + 1]
    read_before = np.concatenate([[np.uint64(0)], dlv_bytes[end_idx[:-1]]]).astype(np.uint64)
    need = np.maximum.reduceat(held, starts) - read_before
    return end_idx.astype(np.uint64), need.astype(np.uint64)


def k_block_buffer(dlv_pkts: U64, dlv_bytes: U64, ooo_bytes: U64, k: int) -> U64:
    """Receive buffer (bytes) needed to complete each block of k contiguous packets."""
    return k_blocks(dlv_pkts, dlv_bytes, ooo_bytes, k)[1]


def block_goodput_bps(t: F64, dlv_bytes: U64, ends: U64, t0: float) -> F64:
    """Goodput of each block: bytes delivered since the previous block over the time since."""
    if len(ends) == 0:
        return np.zeros(0, dtype=np.float64)
    idx = ends.astype(np.int64)
    t_end = t[idx]
    t_prev = np.concatenate([[t0], t_end[:-1]])
    b_end = dlv_bytes[idx].astype(np.float64)
    b_prev = np.concatenate([[0.0], b_end[:-1]])
    dt = t_end - t_prev
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(dt > 0, (b_end - b_prev) * 8 / dt, np.nan), dtype=np.float64)


def nearest_rank(values: F64, q: float) -> float | None:
    """The q-quantile by nearest rank (the value of rank ceil(q * n) among the n non-NaN
    values, at least the first); None when there is none."""
    v = np.sort(values[~np.isnan(values)])
    if len(v) == 0:
        return None
    return float(v[max(0, math.ceil(q * len(v)) - 1)])


def block_goodput_low_bps(t_end: F64, goodput: F64, warmup_s: float, q: float) -> float | None:
    """How low the per-block goodput falls in steady state: the q-quantile (nearest rank) of
    the blocks that end at or after warmup_s, never the first block (it spans the handshake
    and slow start). Seed 001's Fig. 4 measure of the dips of original MPTCP."""
    keep = t_end >= warmup_s
    keep[:1] = False
    return nearest_rank(goodput[keep], q)


def link_utilisation(
    throughput_bps: Mapping[str, float | None], rates_bps: Mapping[str, float]
) -> dict[str, float | None]:
    """Throughput over configured rate, per key present in both mappings (a fraction)."""
    return {
        key: (tp / rates_bps[key] if tp is not None and rates_bps[key] > 0 else None)
        for key, tp in throughput_bps.items()
        if key in rates_bps
    }
