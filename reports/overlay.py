"""Overlay campaigns on one figure: each paper metric and rate against a sweep axis shared by
all of them, one line per (campaign, variant) with 95 % t error bars; the campaign's line
style tells the campaigns apart and each is labelled with its name and kernel (run.json
`hosts.*.kernel`). Two kernels, two nights, or a reproduction next to its rerun."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig.errors import UsageError
from reports.figures import AXIS_METRICS, axis_series
from reports.plotting import Plot, is_numeric, new_figure, save_figure
from reports.results import Results, fmt_value, short_axis
from reports.tables import Display

if TYPE_CHECKING:
    from matplotlib.axes import Axes

STYLES = ("-", "--", ":", "-.")  # line style per campaign, in the order given
VARIANT = "variant"  # the x axis when no campaign sweeps anything


def kernels(results: Results) -> list[str]:
    """Kernels the campaign's hosts ran (run.json `hosts.<host>.kernel`), sorted."""
    seen = {
        str(facts.get("kernel"))
        for bundle in results.bundles.values()
        for facts in (bundle.get("hosts") or {}).values()
        if isinstance(facts, dict) and facts.get("kernel")
    }
    return sorted(seen)


def campaign_labels(campaigns: list[Results]) -> list[str]:
    """`smoke, kernel 6.1.0-26-amd64` per campaign; the results directory is added when
    two labels would be the same (two nights of one campaign on one kernel)."""
    labels = [f"{r.name}, kernel {' + '.join(kernels(r)) or 'not recorded'}" for r in campaigns]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({r.root})" for label, r in zip(labels, campaigns, strict=True)]
    return labels


def shared_axes(campaigns: list[Results]) -> list[str]:
    """Sweep axes every campaign has, in the first one's order; [VARIANT] when none sweeps;
    UsageError naming the directories when they sweep different axes."""
    axes = [a for a in campaigns[0].axes if all(a in r.axes for r in campaigns[1:])]
    if axes:
        return axes
    if all(not r.axes for r in campaigns):
        return [VARIANT]
    swept = "; ".join(
        f"{r.root}: {', '.join(short_axis(a) for a in r.axes) or 'no sweep'}" for r in campaigns
    )
    raise UsageError(f"--overlay: the campaigns share no sweep axis to draw against ({swept})")


def _series(results: Results, axis: str, column: str) -> dict[str, list[tuple[Any, ...]]]:
    if axis != VARIANT:
        return axis_series(results, axis, column)
    from reports.stats import summary_ci

    lines = {}
    for variant, group in results.complete.groupby("variant", sort=True):
        ci = summary_ci(group[column])
        if ci.n:
            lines[str(variant)] = [(str(variant), ci.mean, ci.low, ci.high, ci.n)]
    return lines


def _panel(ax: Axes, campaigns: list[Results], labels: list[str], axis: str, d: Display) -> None:
    from matplotlib.colors import to_hex

    per = [_series(r, axis, d.column) for r in campaigns]
    values = sorted({p[0] for lines in per for pts in lines.values() for p in pts},
                    key=lambda v: (str(type(v)), v))  # fmt: skip
    numeric = is_numeric(values)
    where = {v: (v if numeric else i) for i, v in enumerate(values)}
    colours: dict[str, str] = {}
    for k, (lines, label) in enumerate(zip(per, labels, strict=True)):
        for line, pts in lines.items():
            below = [0.0 if p[2] != p[2] else (p[1] - p[2]) * d.scale for p in pts]
            above = [0.0 if p[3] != p[3] else (p[3] - p[1]) * d.scale for p in pts]
            drawn = ax.errorbar([where[p[0]] for p in pts], [p[1] * d.scale for p in pts],
                                yerr=[below, above], marker="o", capsize=3,
                                linestyle=STYLES[k % len(STYLES)], color=colours.get(line),
                                label=f"{line}: {label}")  # fmt: skip
            colours.setdefault(line, to_hex(drawn.lines[0].get_color()))
    if not numeric:
        ax.set_xticks(list(where.values()), [fmt_value(v) for v in values])
    ax.set_xlabel(short_axis(axis))
    ax.set_ylabel(d.label)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small")


def overlay_figures(campaigns: list[Results], out: Path) -> list[Plot]:
    """One figure per shared sweep axis: every metric the campaigns all have against it."""
    labels = campaign_labels(campaigns)
    shown = [
        d
        for d in AXIS_METRICS
        if all(d.column in r.runs.columns and r.complete[d.column].notna().any()
               for r in campaigns)
    ]  # fmt: skip
    plots: list[Plot] = []
    for i, axis in enumerate(shared_axes(campaigns) if shown else []):
        ncols = min(3, len(shown))
        fig = new_figure(ncols=ncols, nrows=-(-len(shown) // ncols), size=(6.4, 4.2))
        for ax in fig.axes[len(shown) :]:
            ax.set_visible(False)
        for ax, d in zip(fig.axes, shown, strict=False):
            _panel(ax, campaigns, labels, axis, d)
        title = (
            f"Overlay of {' / '.join(labels)} against {short_axis(axis)} "
            f"(line style per campaign; mean, 95 % t interval, none below n = 3)"
        )
        plots.append(save_figure(fig, out, f"overlay_vs_axis{i}", title))
    return plots
