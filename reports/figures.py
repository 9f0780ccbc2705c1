"""Figures of a campaign (matplotlib, no display needed): every paper metric and rate
against each sweep axis with 95 % t error bars per variant (the seeds' layout), box plots
per (variant, sweep point) (seed 003 Figs. 3-6), goodput against throughput, CDFs of
per-run rates and of the OOO queue occupancy per time bin, and per-run time series of
per-subflow cwnd and OOO queue occupancy (seed 000 Fig. 6) from the run's start.

Each figure is written as PNG and SVG; the HTML report embeds the PNG."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig import fsio
from reports import timeline_fig
from reports.results import Results, fmt_value, point_label, short_axis
from reports.stats import summary_ci
from reports.tables import PAPER_METRICS, RATE_METRICS, Display

AXIS_METRICS = (*PAPER_METRICS, *RATE_METRICS)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MAX_TIMESERIES_RUNS = 6  # first repetition of each (variant, point), at most this many
MAX_CDF_RUNS = 60  # runs whose OOO series feed the occupancy CDF (cost bound)
# Time-series panels: (series as the collectors name it, label with its instrument, scale).
PANELS = (
    ("throughput_bps", "throughput per subflow, capture (Mbit/s)", 1e-6),
    ("srtt_ms", "srtt, ss (ms)", 1.0),
    ("cwnd", "cwnd, ss (packets)", 1.0),
    ("ooo_bytes_max", "OOO queue, max per bin, capture (KB)", 1 / 1024),
)


@dataclass(frozen=True)
class Plot:
    """A written figure."""

    key: str  # file stem
    title: str
    png: Path
    svg: Path


def _new(ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (6.4, 3.6)) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    fig.subplots(nrows, ncols, squeeze=False)
    return fig


def _save(fig: Figure, out: Path, key: str, title: str) -> Plot:
    out.mkdir(parents=True, exist_ok=True)
    png, svg = out / f"{key}.png", out / f"{key}.svg"
    fsio.write_with(png, lambda tmp: fig.savefig(tmp, format="png", dpi=90))
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "mprig"}):  # ids from the content alone
        fsio.write_with(svg, lambda tmp: fig.savefig(tmp, format="svg", metadata={"Date": None}))
    return Plot(key, title, png, svg)


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def axis_series(
    results: Results, axis: str, column: str
) -> dict[str, list[tuple[Any, float, float, float, int]]]:
    """Line label -> points (x, mean, low, high, n) of COLUMN against AXIS: one line per
    variant (and per value of any other sweep axis), 95 % t interval, NaN below n = 3."""
    frame = results.complete
    others = [a for a in results.axes if a != axis]
    lines: dict[str, list[tuple[Any, float, float, float, int]]] = {}
    for key, group in frame.groupby(["variant", *others], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        rest = ", ".join(
            f"{short_axis(a)}={fmt_value(v)}" for a, v in zip(others, key[1:], strict=True)
        )
        points = []
        for x, part in group.groupby(axis, sort=True):
            ci = summary_ci(part[column])
            if ci.n:
                points.append((_plain(x), ci.mean, ci.low, ci.high, ci.n))
        if points:
            lines[f"{key[0]} ({rest})" if rest else str(key[0])] = points
    return lines


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


# Share of the space around a sweep point that the variants spread over (seaborn's dodge):
# a category's width, or the smallest gap between two points of an axis drawn to scale,
# where a small share keeps each marker near its true x.
DODGE_CATEGORY = 0.5
DODGE_TO_SCALE = 0.2


def dodge(count: int, spread: float) -> list[float]:
    """Horizontal offsets of COUNT lines around each x, evenly over SPREAD: variants
    measured at one sweep point no longer hide each other's bars."""
    if count < 2:
        return [0.0] * count
    step = spread / (count - 1)
    return [(i - (count - 1) / 2) * step for i in range(count)]


def _positions(values: list[Any]) -> tuple[dict[Any, float], float, bool]:
    """x of each sweep value, the spread of the variants around it, and whether the axis is
    drawn to scale: a numeric axis with two values or more; one value or text is drawn by
    category."""
    if _numeric(values) and len(values) > 1:
        gap = min(b - a for a, b in itertools.pairwise(values))
        return {v: float(v) for v in values}, DODGE_TO_SCALE * gap, True
    return {v: float(i) for i, v in enumerate(values)}, DODGE_CATEGORY, False


def _metric_vs_axis(
    ax: Axes, lines: dict[str, list[Any]], axis: str, d: Display, order: dict[str, int]
) -> None:
    """LINES (axis_series) on AX; ORDER gives each line its colour and offset in every panel."""
    values = sorted({p[0] for pts in lines.values() for p in pts}, key=lambda v: (str(type(v)), v))
    where, spread, to_scale = _positions(values)
    offsets = dodge(len(order), spread)
    for label, pts in lines.items():
        xs = [where[p[0]] + offsets[order[label]] for p in pts]
        mean = [p[1] * d.scale for p in pts]
        below = [0.0 if math.isnan(p[2]) else (p[1] - p[2]) * d.scale for p in pts]
        above = [0.0 if math.isnan(p[3]) else (p[3] - p[1]) * d.scale for p in pts]
        ax.errorbar(xs, mean, yerr=[below, above], marker="o", capsize=3, label=label,
                    color=f"C{order[label] % 10}")  # fmt: skip
    if not to_scale:
        ax.set_xticks(list(where.values()), [fmt_value(v) for v in values])
        ax.set_xlim(-0.5, len(values) - 0.5)
    ax.set_xlabel(short_axis(axis))
    ax.set_ylabel(d.label)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def _axis_metrics(results: Results) -> list[Display]:
    shown = [d for d in AXIS_METRICS if d.column in results.runs.columns]
    return [d for d in shown if results.complete[d.column].notna().any()]


def axis_figure(results: Results, axis: str) -> Figure:
    """One panel per paper metric and rate with data, against AXIS."""
    shown = _axis_metrics(results)
    series = [axis_series(results, axis, d.column) for d in shown]
    order = {label: i for i, label in enumerate(sorted(set().union(*series)))}
    ncols = min(3, len(shown))
    fig = _new(ncols=ncols, nrows=-(-len(shown) // ncols))
    for ax in fig.axes[len(shown) :]:
        ax.set_visible(False)
    for ax, d, lines in zip(fig.axes, shown, series, strict=False):
        _metric_vs_axis(ax, lines, axis, d, order)
    return fig


def axis_figures(results: Results, out: Path) -> list[Plot]:
    """Every paper metric and rate against each sweep axis, one line with 95 % t error bars
    per variant (the seeds' figure layout); no bar below n = 3."""
    shown = _axis_metrics(results)
    plots = []
    for i, axis in enumerate(results.axes):
        if not shown or results.complete[axis].dropna().empty:
            continue
        fig = axis_figure(results, axis)
        title = (
            f"{', '.join(d.label for d in shown)} against {short_axis(axis)} "
            "(mean, 95 % t interval; no bar below n = 3)"
        )
        plots.append(_save(fig, out, f"metrics_vs_axis{i}", title))
    return plots


def ecdf(values: Any) -> tuple[Any, Any]:
    """Empirical CDF: sorted values without NaN, and the share at or below each."""
    import numpy as np

    x = np.sort(np.asarray(values, dtype=float))
    x = x[~np.isnan(x)]
    return x, np.arange(1, x.size + 1) / max(x.size, 1)


def cdf_run_figure(results: Results, out: Path) -> Plot | None:
    """CDF over runs of throughput and goodput, one line per variant (all sweep points)."""
    shown = [d for d in RATE_METRICS if d.column in results.runs.columns]
    frame = results.complete
    if not shown or frame.empty:
        return None
    fig = _new(ncols=len(shown))
    for ax, d in zip(fig.axes, shown, strict=True):
        for variant, group in frame.groupby("variant", sort=True):
            x, y = ecdf(group[d.column] * d.scale)
            ax.step(x, y, where="post", label=str(variant))
        ax.set_xlabel(f"{d.label}, per run")
        ax.set_ylabel("share of runs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return _save(fig, out, "cdf_per_run", "CDF of per-run rates per variant (every sweep point)")


def series_samples(results: Results, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Series name -> variant -> every sample of it (all paths and subflows) over the first
    MAX_CDF_RUNS complete runs with a timeseries.parquet, read once per run."""
    import numpy as np

    frame = results.complete.sort_values(["variant", "run_id"], kind="stable")
    parts: dict[str, dict[str, list[Any]]] = {}
    for run in frame.head(MAX_CDF_RUNS).to_dict("records"):
        path = results.root / str(run["run_id"]) / "timeseries.parquet"
        if not path.is_file():
            continue
        ts = read_timeseries(path)
        for name in names:
            for part in (ts.get(name) or {}).values():
                into = parts.setdefault(name, {}).setdefault(str(run["variant"]), [])
                into.append(part["value"].to_numpy(dtype=float))
    return {
        name: {v: np.concatenate(arrays) for v, arrays in sorted(by_variant.items())}
        for name, by_variant in parts.items()
    }


def _cdf_panel(ax: Axes, by_variant: dict[str, Any], xlabel: str, ylabel: str) -> None:
    for variant, values in by_variant.items():
        x, y = ecdf(values)
        ax.step(x, y, where="post", label=f"{variant} ({x.size} samples)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def cdf_ooo_figure(results: Results, out: Path) -> Plot | None:
    """CDF of the OOO queue occupancy per time bin (capture), one line per variant."""
    samples = series_samples(results, ("ooo_bytes_max", "ooo_bytes"))
    by_variant = samples.get("ooo_bytes_max") or samples.get("ooo_bytes")
    if not by_variant:
        return None
    fig = _new(size=(6.4, 4.0))
    kb = {v: values / 1024 for v, values in by_variant.items()}
    _cdf_panel(fig.axes[0], kb, "OOO queue occupancy per time bin (KB)", "share of bins")
    return _save(fig, out, "cdf_ooo_occupancy", "CDF of the OOO queue occupancy per time bin")


# Latency samples the collectors keep per run: (series, label with instrument, to ms).
LATENCY = (
    ("srtt_ms", "RTT per ss sample, every subflow (srtt, ms)", 1.0),
    ("block_delay_s", "delay per block, blocks tool (send to receive, ms)", 1e3),
)


def cdf_latency_figure(results: Results, out: Path) -> Plot | None:
    """CDFs of per-sample latency, one line per variant: the sender's smoothed RTT of every
    ss sample and, for the blocks traffic tool, the delay of every block."""
    samples = series_samples(results, tuple(name for name, _, _ in LATENCY))
    shown = [(name, label, scale) for name, label, scale in LATENCY if samples.get(name)]
    if not shown:
        return None
    fig = _new(ncols=len(shown), size=(6.4, 4.0))
    for ax, (name, label, scale) in zip(fig.axes, shown, strict=True):
        scaled = {v: values * scale for v, values in samples[name].items()}
        _cdf_panel(ax, scaled, label, "share of samples")
    title = "CDF of latency per sample: " + "; ".join(label for _, label, _ in shown)
    return _save(fig, out, "cdf_latency", title)


def box_groups(results: Results, column: str) -> list[tuple[str, list[float]]]:
    """(label "variant\\npoint", values) per (variant, sweep point) with data, in table order."""
    frame = results.complete
    out = []
    for key, group in frame.groupby(["variant", *results.axes], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        values = group[column].dropna().astype(float).tolist()
        point = ", ".join(fmt_value(v) for v in key[1:])
        if values:
            out.append((f"{key[0]}\n{point}" if point else str(key[0]), values))
    return out


def box_figure(results: Results, out: Path) -> Plot | None:
    """Box plots per (variant, sweep point) (seed 003 Figs. 3-6): never pooled over points."""
    shown = [d for d in RATE_METRICS if d.column in results.runs.columns]
    if not shown or results.complete.empty:
        return None
    groups = {d.column: box_groups(results, d.column) for d in shown}
    width = max(6.4, 0.55 * max(len(g) for g in groups.values()))
    fig = _new(ncols=len(shown), size=(width, 3.8))
    for ax, d in zip(fig.axes, shown, strict=True):
        labels = [label for label, _ in groups[d.column]]
        data = [[v * d.scale for v in values] for _, values in groups[d.column]]
        if data:
            ax.boxplot(data, tick_labels=labels)
        ax.set_ylabel(d.label)
        ax.tick_params(axis="x", labelsize="x-small")
        ax.grid(alpha=0.3, axis="y")
    title = "Rates per variant and sweep point (box: quartiles, whiskers 1.5 IQR)"
    return _save(fig, out, "box_per_variant_point", title)


def scatter_figure(results: Results, out: Path) -> Plot | None:
    """Goodput against throughput per run: the gap is reordering and retransmission cost."""
    frame = results.complete
    if frame.empty or not {"throughput_bps", "goodput_bps"} <= set(frame.columns):
        return None
    fig = _new(size=(5.0, 4.2))
    ax = fig.axes[0]
    for variant, group in frame.groupby("variant", sort=True):
        ax.scatter(group["throughput_bps"] / 1e6, group["goodput_bps"] / 1e6, label=str(variant))
    top = float(frame[["throughput_bps", "goodput_bps"]].max().max()) / 1e6
    ax.plot([0, top], [0, top], color="grey", linestyle="--", linewidth=1, label="goodput = thr.")
    ax.set_xlabel("Throughput (Mbit/s)")
    ax.set_ylabel("Goodput (Mbit/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, out, "goodput_vs_throughput", "Goodput against throughput per run")


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
    if isinstance(started, int | float):  # the timeline's applied changes (mprig/timeline.py)
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
        fig = _new(ncols=ncols, nrows=-(-len(panels) // ncols))
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
        plots.append(_save(fig, out, f"timeseries_{run['run_id']}", title))
    return plots


def all_figures(results: Results, out: Path) -> list[Plot]:
    """Every figure of a report, in report order."""
    plots = axis_figures(results, out)
    more = (box_figure, scatter_figure, cdf_run_figure, cdf_ooo_figure, cdf_latency_figure)
    plots += [p for p in (make(results, out) for make in more) if p]
    return plots + timeseries_figures(results, out)
