"""RBPM's algorithm (paper 002, docs/rbpm.md), pure: the receive buffer the active subflows
need (the paper's Eq. 2-4), the max-min score (Eq. 5) and the decision to stop or re-enable
subflows. Standard library only: mprig.run.rbpm_run.source() inlines this module into the
controller it ships to the client, in place of mprig/stack/rbpm.py's import of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ENABLE_FACTOR = 2.0  # re-enable every stopped subflow when free > this x required

# -- the algorithm (pure) ---------------------------------------------------------------


@dataclass(frozen=True)
class Subflow:
    """One subflow as the algorithm sees it."""

    key: str  # local address:port (unique per subflow)
    addr: str  # local address: the endpoint RBPM marks
    rtt_ms: float  # RTT_i
    mss: int  # MSS_i, bytes
    pkts: float  # o_i: packets in flight per RTT (the paper takes cwnd)
    bw: float  # bandwidth estimate, bytes/s (for the score)
    active: bool = True  # not stopped by RBPM


def k_ooo(rtt_i: float, rtt_j: float) -> int:
    """Eq. 2: how many times subflow i sends a window during subflow j's RTT, beyond the
    first: floor(RTT_j / RTT_i) - 1 when the ratio is at least 2, else 0 (for RTT_j > RTT_i)."""
    if rtt_i <= 0 or rtt_j <= rtt_i:
        return 0
    ratio = rtt_j / rtt_i
    return math.floor(ratio) - 1 if ratio >= 2 else 0


def required_bytes(subflows: Sequence[Subflow]) -> float:
    """Eq. 3-4: sum over the set of k(i, j) * o_i * MSS_i, j the subflow with the largest
    RTT: the out-of-order data the faster subflows deliver while j's packet is in flight."""
    if not subflows:
        return 0.0
    rtt_j = max(s.rtt_ms for s in subflows)
    return float(sum(k_ooo(s.rtt_ms, rtt_j) * s.pkts * s.mss for s in subflows))


def _norm(value: float, low: float, high: float) -> float:
    return (value - low) / (high - low) if high > low else 0.0


def scores(subflows: Sequence[Subflow]) -> dict[str, float]:
    """Eq. 5, max-min normalisation over all subflows: (BW_i - BW_min) / (BW_max - BW_min)
    - (RTT_i - RTT_min) / (RTT_max - RTT_min). Higher is better."""
    bws = [s.bw for s in subflows]
    rtts = [s.rtt_ms for s in subflows]
    return {
        s.key: _norm(s.bw, min(bws), max(bws)) - _norm(s.rtt_ms, min(rtts), max(rtts))
        for s in subflows
    }


@dataclass(frozen=True)
class Decision:
    """What one step decided."""

    action: str  # none | backup | nobackup
    targets: tuple[str, ...]  # subflow keys the action applies to
    required: float  # Eq. 3 over the subflows active before the action, bytes
    required_all: float  # Eq. 3 over every subflow, bytes
    free: float  # free receive buffer, bytes
    scores: dict[str, float]


def decide(subflows: Sequence[Subflow], free: float, may_enable: bool = True) -> Decision:
    """Algorithm 1 on one snapshot: re-enable every stopped subflow when free > 2 x what all
    subflows need (and `may_enable`); else stop the worst active subflow, recalculate,
    repeat, while the active ones need more than is free (never the last one)."""
    every = scores(subflows)
    active = [s for s in subflows if s.active]
    required, required_all = required_bytes(active), required_bytes(subflows)
    stopped = tuple(s.key for s in subflows if not s.active)

    def made(action: str, targets: tuple[str, ...]) -> Decision:
        return Decision(action, targets, required, required_all, free, every)

    if stopped and may_enable and free > ENABLE_FACTOR * required_all:
        return made("nobackup", stopped)
    worst: list[str] = []
    while len(active) > 1 and required_bytes(active) > free:
        out = min(active, key=lambda s: (every[s.key], -s.rtt_ms))
        worst.append(out.key)
        active.remove(out)
    return made("backup", tuple(worst)) if worst else made("none", ())
