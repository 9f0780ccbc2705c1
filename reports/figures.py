"""Figures of a campaign (matplotlib, no display needed): rates against each sweep axis
with 95 % bands, box plots per variant (seed 003 Figs. 3-6), goodput against throughput,
and per-run time series of per-subflow cwnd and OOO queue occupancy (seed 000 Fig. 6).

Each figure is written as PNG and SVG; the HTML report embeds the PNG."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig import fsio
from reports.results import Results, fmt_value, point_label, short_axis
from reports.stats import summary_ci
from reports.tables import RATE_METRICS, Display

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MAX_TIMESERIES_RUNS = 6  # first repetition of each (variant, point), at most this many
# OOO queue occupancy per time bin as the collectors name it (capture source).
OOO_SERIES = (("ooo_bytes_max", "OOO queue, max per bin (KB)", 1 / 1024),)


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
    fsio.write_with(svg, lambda tmp: fig.savefig(tmp, format="svg", metadata={"Date": None}))
    return Plot(key, title, png, svg)


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _rate_vs_axis(ax: Axes, results: Results, axis: str, d: Display) -> None:
    frame = results.complete
    values = sorted(frame[axis].dropna().unique().tolist(), key=str)
    numeric = _numeric(values)
    if numeric:
        values = sorted(values)
    xs = values if numeric else list(range(len(values)))
    for variant, group in frame.groupby("variant", sort=True):
        cis = [summary_ci(group.loc[group[axis] == v, d.column]) for v in values]
        mean = [c.mean * d.scale for c in cis]
        ax.plot(xs, mean, marker="o", label=str(variant))
        low = [(c.low if not math.isnan(c.low) else c.mean) * d.scale for c in cis]
        high = [(c.high if not math.isnan(c.high) else c.mean) * d.scale for c in cis]
        ax.fill_between(xs, low, high, alpha=0.2)
    if not numeric:
        ax.set_xticks(xs, [fmt_value(v) for v in values])
    ax.set_xlabel(short_axis(axis))
    ax.set_ylabel(d.label)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def axis_figures(results: Results, out: Path) -> list[Plot]:
    """Throughput and goodput against each sweep axis, one line and 95 % band per variant."""
    shown = [d for d in RATE_METRICS if d.column in results.runs.columns]
    plots = []
    for i, axis in enumerate(results.axes):
        if not shown or results.complete[axis].dropna().empty:
            continue
        fig = _new(ncols=len(shown))
        for ax, d in zip(fig.axes, shown, strict=True):
            _rate_vs_axis(ax, results, axis, d)
        title = f"Throughput and goodput against {short_axis(axis)} (mean, 95 % CI)"
        plots.append(_save(fig, out, f"rates_vs_axis{i}", title))
    return plots


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
    labels = [""] * len(frame)
    for column in ("subflow", "path"):  # path wins: one line per path where it is known
        if column in frame.columns:
            labels = [
                str(v) if isinstance(v, str) and v else old
                for v, old in zip(frame[column].astype(object), labels, strict=True)
            ]
    frame = frame.assign(label=labels)
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


def _plot_series(
    ax: Axes, series: dict[str, pd.DataFrame], ylabel: str, scale: float, xlim: tuple[float, float]
) -> None:
    for path, part in series.items():
        ax.plot(part["t_s"], part["value"] * scale, label=path or "connection", linewidth=1)
    ax.set_xlim(*xlim)
    ax.set_xlabel("time since the run's start (s)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="small")


def timeseries_figures(results: Results, out: Path) -> list[Plot]:
    """Per-subflow cwnd and OOO queue occupancy over time, one figure per shown run."""
    plots = []
    for run in _timeseries_runs(results):
        ts = read_timeseries(results.root / str(run["run_id"]) / "timeseries.parquet")
        panels = [
            (s, label, scale)
            for s, label, scale in (("cwnd", "cwnd (packets)", 1.0), *OOO_SERIES)
            if s in ts
        ]
        if not panels:
            continue
        fig = _new(ncols=len(panels))
        xlim = time_limits(ts)
        for ax, (s, label, scale) in zip(fig.axes, panels, strict=True):
            _plot_series(ax, ts[s], label, scale, xlim)
        point = {a: run[a] for a in results.axes}
        title = f"{run['run_id']}: {run['variant']}, {point_label(point)}"
        plots.append(_save(fig, out, f"timeseries_{run['run_id']}", title))
    return plots


def all_figures(results: Results, out: Path) -> list[Plot]:
    """Every figure of a report, in report order."""
    plots = axis_figures(results, out)
    plots += [p for p in (box_figure(results, out), scatter_figure(results, out)) if p]
    return plots + timeseries_figures(results, out)
