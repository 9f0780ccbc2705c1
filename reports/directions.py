"""Which direction of each metric is bad: the regression rule needs it.

The collectors own the table (`METRIC_DIRECTIONS` in collectors/directions.py or
collectors/metrics.py); this module reads it and falls back to `FALLBACK` below for metrics
it does not list, so a report or comparison never depends on import order.
"""

from __future__ import annotations

import importlib
from typing import Any

HIGHER = 1  # higher is better: a drop is a regression
LOWER = -1  # lower is better: a rise is a regression
NEUTRAL = 0  # informative only (cwnd, counts that depend on the path): never a regression

FALLBACK: dict[str, int] = {
    "throughput_bps": HIGHER,
    "goodput_bps": HIGHER,
    "iperf3_bps": HIGHER,
    "link_util": HIGHER,
    "ooo_ratio": LOWER,
    "ooo_max_bytes": LOWER,
    "ooo_max_packets": LOWER,
    "ooo_mean_bytes": LOWER,
    "retransmitted_packets": LOWER,
    "duplicate_packets": LOWER,
    "reinjected_bytes": LOWER,
    "unmapped_bytes": LOWER,
    "rcvbuf_k_max_bytes": LOWER,
    "goodput_k_p5_bps": HIGHER,
    "srtt_ms": LOWER,
    "cwnd_mean": NEUTRAL,
}

_WORDS = {
    "higher": HIGHER,
    "up": HIGHER,
    "max": HIGHER,
    "higher_is_better": HIGHER,
    "+": HIGHER,
    "lower": LOWER,
    "down": LOWER,
    "min": LOWER,
    "lower_is_better": LOWER,
    "-": LOWER,
}


def _normalise(value: Any) -> int:
    if isinstance(value, str):
        return _WORDS.get(value.strip().lower(), NEUTRAL)
    if isinstance(value, bool):  # True: higher is better
        return HIGHER if value else LOWER
    if isinstance(value, int | float):
        return HIGHER if value > 0 else LOWER if value < 0 else NEUTRAL
    return _normalise(getattr(value, "value", getattr(value, "name", "")))


def _collectors_table() -> dict[str, int]:
    for module in ("collectors.directions", "collectors.metrics"):
        try:
            table = getattr(importlib.import_module(module), "METRIC_DIRECTIONS", None)
        except ImportError:
            continue
        if isinstance(table, dict):
            return {str(k): _normalise(v) for k, v in table.items()}
    return {}


def directions() -> dict[str, int]:
    """Metric (base name, without the `.<path>` suffix) -> HIGHER, LOWER or NEUTRAL."""
    return {**FALLBACK, **_collectors_table()}


def direction_of(metric: str, table: dict[str, int] | None = None) -> int | None:
    """Direction of a metric column (`throughput_bps.wifi` uses `throughput_bps`); None if
    no table lists it."""
    table = directions() if table is None else table
    if metric in table:
        return table[metric]
    return table.get(metric.split(".", 1)[0])
