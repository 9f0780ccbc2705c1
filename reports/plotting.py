"""Figure plumbing shared by the report's figures (figures.py, figures_timeseries.py,
overlay.py): a constrained-layout matplotlib Figure without a display, written atomically
as PNG and as SVG whose ids come from the content alone (the same figure, the same bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig import fsio

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Plot:
    """A written figure."""

    key: str  # file stem
    title: str
    png: Path
    svg: Path


def new_figure(ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (6.4, 3.6)) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    fig.subplots(nrows, ncols, squeeze=False)
    return fig


def save_figure(fig: Figure, out: Path, key: str, title: str) -> Plot:
    out.mkdir(parents=True, exist_ok=True)
    png, svg = out / f"{key}.png", out / f"{key}.svg"
    fsio.write_with(png, lambda tmp: fig.savefig(tmp, format="png", dpi=90))
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "mprig"}):  # ids from the content alone
        fsio.write_with(svg, lambda tmp: fig.savefig(tmp, format="svg", metadata={"Date": None}))
    return Plot(key, title, png, svg)


def is_numeric(values: list[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
