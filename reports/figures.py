"""Figures of a campaign (matplotlib, no display needed): every paper metric and rate
against each sweep axis with 95 % t error bars per variant (the papers' layout), box plots
per (variant, sweep point) (paper 003 Figs. 3-6), goodput against throughput, CDFs of
per-run rates and of the OOO queue occupancy per time bin, and per-run time series of
per-subflow cwnd and OOO queue occupancy (paper 000 Fig. 6) from the run's start.

Each figure is written as PNG and SVG (reports/plotting.py); the HTML report embeds the PNG.
The per-run time series are in reports/figures_timeseries.py."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reports.figures_timeseries import read_timeseries, timeseries_figures
from reports.plotting import Plot, is_numeric, new_figure, save_figure
from reports.results import Results, fmt_value, short_axis
from reports.stats import summary_ci
from reports.tables import PAPER_METRICS, RATE_METRICS, Display

AXIS_METRICS = (*PAPER_METRICS, *RATE_METRICS)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MAX_CDF_RUNS = 60  # runs whose OOO series feed the occupancy CDF (cost bound)


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
    if is_numeric(values) and len(values) > 1:
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
    fig = new_figure(ncols=ncols, nrows=-(-len(shown) // ncols))
    for ax in fig.axes[len(shown) :]:
        ax.set_visible(False)
    for ax, d, lines in zip(fig.axes, shown, series, strict=False):
        _metric_vs_axis(ax, lines, axis, d, order)
    return fig


def axis_figures(results: Results, out: Path) -> list[Plot]:
    """Every paper metric and rate against each sweep axis, one line with 95 % t error bars
    per variant (the papers' figure layout); no bar below n = 3."""
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
        plots.append(save_figure(fig, out, f"metrics_vs_axis{i}", title))
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
    fig = new_figure(ncols=len(shown))
    for ax, d in zip(fig.axes, shown, strict=True):
        for variant, group in frame.groupby("variant", sort=True):
            x, y = ecdf(group[d.column] * d.scale)
            ax.step(x, y, where="post", label=str(variant))
        ax.set_xlabel(f"{d.label}, per run")
        ax.set_ylabel("share of runs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return save_figure(
        fig, out, "cdf_per_run", "CDF of per-run rates per variant (every sweep point)"
    )


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
    fig = new_figure(size=(6.4, 4.0))
    kb = {v: values / 1024 for v, values in by_variant.items()}
    _cdf_panel(fig.axes[0], kb, "OOO queue occupancy per time bin (KB)", "share of bins")
    return save_figure(fig, out, "cdf_ooo_occupancy", "CDF of the OOO queue occupancy per time bin")


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
    fig = new_figure(ncols=len(shown), size=(6.4, 4.0))
    for ax, (name, label, scale) in zip(fig.axes, shown, strict=True):
        scaled = {v: values * scale for v, values in samples[name].items()}
        _cdf_panel(ax, scaled, label, "share of samples")
    title = "CDF of latency per sample: " + "; ".join(label for _, label, _ in shown)
    return save_figure(fig, out, "cdf_latency", title)


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
    """Box plots per (variant, sweep point) (paper 003 Figs. 3-6): never pooled over points."""
    shown = [d for d in RATE_METRICS if d.column in results.runs.columns]
    if not shown or results.complete.empty:
        return None
    groups = {d.column: box_groups(results, d.column) for d in shown}
    width = max(6.4, 0.55 * max(len(g) for g in groups.values()))
    fig = new_figure(ncols=len(shown), size=(width, 3.8))
    for ax, d in zip(fig.axes, shown, strict=True):
        labels = [label for label, _ in groups[d.column]]
        data = [[v * d.scale for v in values] for _, values in groups[d.column]]
        if data:
            ax.boxplot(data, tick_labels=labels)
        ax.set_ylabel(d.label)
        ax.tick_params(axis="x", labelsize="x-small")
        ax.grid(alpha=0.3, axis="y")
    title = "Rates per variant and sweep point (box: quartiles, whiskers 1.5 IQR)"
    return save_figure(fig, out, "box_per_variant_point", title)


def scatter_figure(results: Results, out: Path) -> Plot | None:
    """Goodput against throughput per run: the gap is reordering and retransmission cost."""
    frame = results.complete
    if frame.empty or not {"throughput_bps", "goodput_bps"} <= set(frame.columns):
        return None
    fig = new_figure(size=(5.0, 4.2))
    ax = fig.axes[0]
    for variant, group in frame.groupby("variant", sort=True):
        ax.scatter(group["throughput_bps"] / 1e6, group["goodput_bps"] / 1e6, label=str(variant))
    top = float(frame[["throughput_bps", "goodput_bps"]].max().max()) / 1e6
    ax.plot([0, top], [0, top], color="grey", linestyle="--", linewidth=1, label="goodput = thr.")
    ax.set_xlabel("Throughput (Mbit/s)")
    ax.set_ylabel("Goodput (Mbit/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return save_figure(fig, out, "goodput_vs_throughput", "Goodput against throughput per run")


def all_figures(results: Results, out: Path) -> list[Plot]:
    """Every figure of a report, in report order."""
    plots = axis_figures(results, out)
    more = (box_figure, scatter_figure, cdf_run_figure, cdf_ooo_figure, cdf_latency_figure)
    plots += [p for p in (make(results, out) for make in more) if p]
    return plots + timeseries_figures(results, out)
