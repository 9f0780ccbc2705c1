"""Latency under load per path from the latency probe's logs (`ping-<path>.jsonl`, written
when the campaign sets traffic.ping_interval_ms): the RTT quantiles and loss of the echoes
sent while the traffic ran (the window the runner recorded in run.json), and every echo's
RTT as a series (source "ping", metric "rtt_ms")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collectors.runinfo import RunInfo
from collectors.runparts import Part, read_text
from mprig.run import latency

if TYPE_CHECKING:
    import pandas as pd

# runs.parquet per-path columns `<metric>.<path>` (collect.PATH_METRICS), from `summarise`
COLUMNS = {"ping_p50_ms": "rtt_p50_ms", "ping_p95_ms": "rtt_p95_ms"}
COLUMNS |= {"ping_p99_ms": "rtt_p99_ms", "ping_loss_pct": "loss_pct"}
COLUMNS |= {"owd_up_p50_ms": "up_p50_ms", "owd_down_p50_ms": "down_p50_ms"}  # one-way delays
PATH_METRICS = tuple(COLUMNS)


def latency_part(info: RunInfo) -> Part:
    """`latency` (path -> summary) and the columns, for a run that probed (else nothing)."""
    part = Part()
    summary = info.record.get("summary")
    window = summary.get("latency_window") if isinstance(summary, dict) else None
    if not isinstance(window, list) or len(window) != 2:
        return part
    paths: dict[str, Any] = {}
    for path in info.path_rates_bps():
        name = latency.log_name(path)
        text = read_text(info.bundle, name, part)
        try:
            echoes = latency.parse(text) if text is not None else None
        except ValueError as e:
            part.problems.append(f"{name}: {e}")
            echoes = None
        if echoes is not None:
            paths[path] = latency.summarise(echoes, (float(window[0]), float(window[1])))
            part.series.append(_series(path, echoes))
    part.metrics["latency"] = paths
    part.metrics["columns"] = {
        f"{col}.{path}": s[key] for path, s in paths.items() for col, key in COLUMNS.items()
    }
    return part


def _series(path: str, echoes: list[latency.Echo]) -> pd.DataFrame:
    import pandas as pd

    answered = [e for e in echoes if e.rtt_ms is not None]
    return pd.DataFrame(
        {
            "time": [e.sent for e in answered],
            "source": "ping",
            "metric": "rtt_ms",
            "path": path,
            "subflow": None,
            "value": [e.rtt_ms for e in answered],
        }
    )
