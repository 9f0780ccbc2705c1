"""Per-flow throughput of the competing flows and Jain's fairness index (pure functions).

Every flow is measured over one window, the run's own traffic (its wall-clock start and
end), from its receiver's log of cumulative bytes (mprig/run/crossflow.py): flows that
started earlier or ran on after the run's traffic are not credited with the time they had
the link alone. Coupled congestion control's goal (RFC 6356 section 2, goal 2) is that an
MPTCP connection takes no more at a shared bottleneck than one TCP flow would, so the run's
connection counts as one flow, whatever its number of subflows.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FlowLog:
    """What one flow's two ends logged."""

    samples: tuple[tuple[float, int], ...]  # receiver: (wall-clock s, cumulative bytes)
    cc: str | None  # sender: the congestion control its socket had (tcp), "" for udp
    sent_bytes: int | None  # sender: bytes handed to the socket, last count logged
    error_t: float | None  # when the first end that failed failed (wall clock s)
    error: str | None  # and why


Error = tuple[float, str]  # (wall-clock s, message) of a flow program's failure


def _error(doc: dict[str, object]) -> Error:
    t = doc.get("t")
    return (float(t) if isinstance(t, int | float) else 0.0, str(doc.get("message")))


def parse_receiver(text: str) -> tuple[tuple[tuple[float, int], ...], Error | None]:
    """(samples in time order, error) from a receiver's JSON lines; ValueError when a line
    is not one of the program's."""
    samples: list[tuple[float, int]] = []
    error: Error | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        if doc.get("event") == "error":
            error = _error(doc)
        else:
            samples.append((float(doc["t"]), int(doc["bytes"])))
    return tuple(sorted(samples)), error


def parse_sender(text: str) -> tuple[str | None, int | None, Error | None]:
    """(congestion control read back, last sent count, error) from a sender's JSON lines."""
    cc: str | None = None
    sent: int | None = None
    error: Error | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        if doc.get("event") == "start":
            cc = str(doc.get("cc", ""))
        elif doc.get("event") == "error":
            error = _error(doc)
        elif "sent" in doc:
            sent = int(doc["sent"])
    return cc, sent, error


def bytes_at(samples: Sequence[tuple[float, int]], t: float) -> float:
    """Cumulative bytes at time t, linear between samples (0 before the first, the last
    count after the last: a flow that ended received nothing more)."""
    if not samples or t <= samples[0][0]:
        return 0.0 if not samples or t < samples[0][0] else float(samples[0][1])
    for (t0, b0), (t1, b1) in itertools.pairwise(samples):
        if t0 <= t <= t1:
            return b0 + (b1 - b0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)
    return float(samples[-1][1])


def rate_bps(samples: Sequence[tuple[float, int]], start: float, end: float) -> float:
    """Mean received rate over [start, end], bits/s."""
    if end <= start:
        raise ValueError(f"empty window [{start:.3f}, {end:.3f}]")
    return (bytes_at(samples, end) - bytes_at(samples, start)) * 8 / (end - start)


def jain(rates: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when every flow gets the same,
    1/n when one takes everything; None without a flow or when nothing moved."""
    squares = sum(x * x for x in rates)
    if not rates or squares == 0:
        return None
    return sum(rates) ** 2 / (len(rates) * squares)


def summary(
    main_bps: float,
    flows: dict[str, FlowLog],
    window: tuple[float, float],
    competing: Sequence[str] | None = None,
) -> dict[str, Any]:
    """run.json `cross_traffic`: each flow's rate over the window, the run's connection's,
    and Jain's index and the connection's share over it and the `competing` flows (those
    that share a queue with it; default all)."""
    per_flow: dict[str, dict[str, Any]] = {}
    for label, log in flows.items():
        bps = rate_bps(log.samples, *window)
        per_flow[label] = {"throughput_bps": bps, "cc": log.cc, "sent_bytes": log.sent_bytes}
    labels = list(flows) if competing is None else list(competing)
    rates = [main_bps, *(per_flow[label]["throughput_bps"] for label in labels)]
    total = sum(rates)
    return {
        "window": [round(window[0], 6), round(window[1], 6)],  # what collect measures over
        "main_bps": main_bps,
        "flows": per_flow,
        "competing": labels,
        "jain_index": jain(rates) if labels else None,
        "main_share": main_bps / total if labels and total else None,
    }
