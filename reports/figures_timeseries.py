"""Per-run time-series figures of a report: per-subflow throughput (capture), srtt and cwnd
(ss) and the OOO queue occupancy (capture) from the run's start (paper 000 Fig. 6), with the
run's events marked (ss retransmissions, RBPM actions, the timeline's changes).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reports import timeline_fig
from reports.plotting import Plot, new_figure, save_figure
from reports.results import Results, point_label

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes


MAX_TIMESERIES_RUNS = 6  # first repetition of each (variant, point), at most this many


# Time-series panels: (series as the collectors name it, label with its instrument, scale).
PANELS = (
    ("throughput_bps", "throughput per subflow, capture (Mbit/s)", 1e-6),
    ("srtt_ms", "srtt, ss (ms)", 1.0),
    ("cwnd", "cwnd, ss (packets)", 1.0),
    ("ooo_bytes_max", "OOO queue, max per bin, capture (KB)", 1 / 1024),
)


def read_timeseries(path: Path) -> dict[str, dict[str, pd.DataFrame]]:
    """series ("cwnd", "ooo_bytes_max") -> path or subflow ("" for the connection) -> t, value.

    Reads the collectors' long layout (t, source, metric, path, subflow, value) and a wide
    one (t, cwnd.<path>, ooo_bytes_max, ...)."""
    import pandas as pd

    frame = pd.read_parquet(path)
    time = next((c for c in ("t", "t_s", "time_s", "time") if c in frame.columns), None)
    if time is None or frame.empty:
        return {}
    frame = frame.rename(columns={time: "t_s"})
    name = next((c for c in ("metric", "series") if c in frame.columns), None)
    if name is not None and "value" in frame.columns:
        return _long_series(frame, name)
    out: dict[str, dict[str, pd.DataFrame]] = {}
    for col in frame.columns.drop("t_s"):
        series, _, sub = str(col).partition(".")
        values = frame[["t_s", col]].dropna().rename(columns={col: "value"})
        out.setdefault(series, {})[sub] = values
    return out


def _long_series(frame: pd.DataFrame, name: str) -> dict[str, dict[str, pd.DataFrame]]:
    frame = frame.assign(label=timeline_fig.series_labels(frame, name))  # one line a subflow
    return {
        str(s): {
            str(lab): g[["t_s", "value"]].sort_values("t_s") for lab, g in part.groupby("label")
        }
        for s, part in frame.groupby(name, sort=True)
    }


def _timeseries_runs(results: Results) -> list[dict[str, Any]]:
    frame = results.complete.sort_values(["variant", *results.axes, "repetition"], kind="stable")
    first = frame.drop_duplicates(["variant", *results.axes])
    records: list[dict[str, Any]] = [
        {str(k): v for k, v in r.items()} for r in first.to_dict("records")
    ]
    picked = [
        r for r in records if (results.root / str(r["run_id"]) / "timeseries.parquet").is_file()
    ]
    return picked[:MAX_TIMESERIES_RUNS]


def time_limits(ts: dict[str, dict[str, pd.DataFrame]]) -> tuple[float, float]:
    """The x range of a run's time-series panels: from the run's start (t = 0, the recorded
    start) to the last sample of any series, so every panel shows the whole run."""
    ends = [float(part["t_s"].max()) for series in ts.values() for part in series.values()]
    return 0.0, max([e for e in ends if e == e] or [1.0])


def traffic_window(record: dict[str, Any]) -> tuple[float, float] | None:
    """Start and end of the traffic stage in seconds since the run's start, from run.json
    `timings.stages` (in order: setup, traffic, ...); None when not recorded."""
    stages = (record.get("timings") or {}).get("stages")
    if not isinstance(stages, dict) or "traffic" not in stages:
        return None
    before = 0.0
    for name, seconds in stages.items():
        if not isinstance(seconds, int | float):
            return None
        if name == "traffic":
            return before, before + float(seconds)
        before += float(seconds)
    return None


def _plot_series(
    ax: Axes,
    series: dict[str, pd.DataFrame],
    ylabel: str,
    scale: float,
    xlim: tuple[float, float],
    traffic: tuple[float, float] | None = None,
    events: tuple[Event, ...] = (),
) -> None:
    for path, part in series.items():
        ax.plot(part["t_s"], part["value"] * scale, label=path or "connection", linewidth=1)
    if traffic is not None:
        ax.axvspan(*traffic, color="grey", alpha=0.1, label="traffic")
    _mark_events(ax, list(events))
    ax.set_xlim(xlim[0], max(xlim[1], traffic[1] if traffic else 0.0))
    ax.set_xlabel("time since the run's start (s)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if len(series) > 1 or traffic is not None or events:
        ax.legend(fontsize="small")


@dataclass(frozen=True)
class Event:
    """Something that happened during a run, marked on its time-series panels."""

    t_s: float  # seconds since the run's start
    kind: str  # "retransmission (ss)" or "RBPM <action>"
    where: str  # path or subflow; "" for the connection


def retransmission_events(ts: dict[str, dict[str, pd.DataFrame]]) -> list[Event]:
    """One event per ss sample at which a subflow's cumulative `retrans` counter grew."""
    import numpy as np

    out = []
    for where, part in sorted((ts.get("retrans") or {}).items()):
        values = part["value"].to_numpy(dtype=float)
        grew = np.flatnonzero(np.diff(values) > 0) + 1
        out += [Event(float(part["t_s"].iloc[i]), "retransmission (ss)", where) for i in grew]
    return out


def rbpm_events(text: str, started: float, name: str = "rbpm.jsonl") -> list[Event]:
    """RBPM's actions from its log (docs/bundle.md): steps whose action is not `none`.
    STARTED: the run's start (run.json `timings.started`); NAME is used in errors."""
    import json

    from mprig.errors import UsageError

    out = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            entry = json.loads(line) if line.strip() else {}
            action = (entry.get("decision") or {}).get("action", "none")
            t = float(entry["t"]) - started if entry.get("event") == "step" else None
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise UsageError(f"{name}:{number}: not an RBPM log line ({e})") from e
        if t is not None and action != "none":
            out.append(Event(t, f"RBPM {action}", ""))
    return out


def run_events(
    results: Results, run_id: str, ts: dict[str, dict[str, pd.DataFrame]]
) -> list[Event]:
    """Events of one run: ss retransmissions, and RBPM's actions where its log is kept."""
    events = retransmission_events(ts)
    log = results.root / run_id / "rbpm.jsonl"
    started = (results.bundles.get(run_id, {}).get("timings") or {}).get("started")
    if log.is_file() and isinstance(started, int | float):
        events += rbpm_events(log.read_text(errors="replace"), float(started), str(log))
    if isinstance(started, int | float):  # the timeline's applied changes (mprig/run/timeline.py)
        events += [Event(t, k, "") for t, k in timeline_fig.run_events(log.parent, started)]
    return events


def _mark_events(ax: Axes, events: list[Event]) -> None:
    """Retransmissions as ticks along the bottom edge, other events as dashed lines."""
    retrans = [e.t_s for e in events if e.kind.startswith("retransmission")]
    if retrans:
        ax.plot(retrans, [0.02] * len(retrans), linestyle="none", marker="|", markersize=8,
                color="red", transform=ax.get_xaxis_transform(),
                label=f"retransmission (ss), {len(retrans)}")  # fmt: skip
    kinds = sorted({e.kind for e in events} - {"retransmission (ss)"})
    for kind, colour in zip(kinds, itertools.cycle(timeline_fig.EVENT_COLOURS), strict=False):
        for i, e in enumerate(x for x in events if x.kind == kind):
            ax.axvline(e.t_s, color=colour, linestyle="--", linewidth=0.8,
                       label=kind if i == 0 else None)  # fmt: skip


def timeseries_panels(ts: dict[str, dict[str, pd.DataFrame]]) -> list[tuple[str, str, float]]:
    """The PANELS a run's time series can fill, in PANELS order."""
    return [p for p in PANELS if p[0] in ts]


def timeseries_figures(results: Results, out: Path) -> list[Plot]:
    """Per-subflow throughput (capture), srtt and cwnd (ss) and the OOO queue occupancy
    (capture) over time from the run's start, one figure per shown run, with its events
    marked (retransmissions, RBPM actions: `run_events`)."""
    plots = []
    for run in _timeseries_runs(results):
        ts = read_timeseries(results.root / str(run["run_id"]) / "timeseries.parquet")
        panels = timeseries_panels(ts)
        if not panels:
            continue
        ncols = min(2, len(panels))
        fig = new_figure(ncols=ncols, nrows=-(-len(panels) // ncols))
        for ax in fig.axes[len(panels) :]:
            ax.set_visible(False)
        xlim = time_limits(ts)
        traffic = traffic_window(results.bundles.get(str(run["run_id"]), {}))
        events = tuple(run_events(results, str(run["run_id"]), ts))
        for ax, (s, label, scale) in zip(fig.axes, panels, strict=False):
            _plot_series(ax, ts[s], label, scale, xlim, traffic, events)
            if s == "throughput_bps":
                timeline_fig.overlay_capacity(ax, results.bundles.get(str(run["run_id"]), {}))
        point = {a: run[a] for a in results.axes}
        title = f"{run['run_id']}: {run['variant']}, {point_label(point)}"
        plots.append(save_figure(fig, out, f"timeseries_{run['run_id']}", title))
    return plots
