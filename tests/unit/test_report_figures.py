"""Issue 19 part 3 (figures): each metric against the sweep axis with error bars per
variant, the way the papers draw them, and CDFs of per-run and per-bin quantities."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import report_synth as rs

from reports import figures, figures_timeseries, results

AXIS = "param.paths.wifi.distance_m"


def frame() -> results.Results:
    rows = []
    for variant, d, values in (
        ("a", 10.0, (10e6, 11e6, 12e6)),
        ("a", 50.0, (5e6, 5e6)),
        ("b", 10.0, (20e6, 20e6, 20e6)),
    ):
        for rep, v in enumerate(values, start=1):
            rows.append(
                {
                    "run_id": f"{variant}{d}-{rep}",
                    "variant": variant,
                    "status": "complete",
                    "repetition": rep,
                    AXIS: d,
                    "throughput_bps": v,
                    "ooo_ratio": 0.1,
                }
            )
    return results.Results(Path("/r"), "f", {"name": "f"}, (), results._derive(pd.DataFrame(rows)))


def test_axis_series_one_line_per_variant_with_t_bars_from_n3() -> None:
    lines = figures.axis_series(frame(), AXIS, "throughput_bps")
    assert sorted(lines) == ["a", "b"]
    a = lines["a"]
    assert [(x, m, n) for x, m, _, _, n in a] == [(10.0, 11e6, 3), (50.0, 5e6, 2)]
    assert a[0][2] == pytest.approx(11e6 - 4.3027 * 1e6 / math.sqrt(3), rel=1e-4)
    assert math.isnan(a[1][2]) and math.isnan(a[1][3])  # n = 2: no bar
    assert [(x, m, lo, hi, n) for x, m, lo, hi, n in lines["b"]] == [(10.0, 20e6, 20e6, 20e6, 3)]


def test_ecdf() -> None:
    x, y = figures.ecdf([3.0, 1.0, math.nan, 2.0])
    assert (x.tolist(), y.tolist()) == ([1.0, 2.0, 3.0], pytest.approx([1 / 3, 2 / 3, 1.0]))


def test_report_draws_metrics_against_the_axis_and_cdfs(tmp_path: Path) -> None:
    res = results.load(rs.write(tmp_path / "c", rs.Synth(repetitions=3)))
    keys = [p.key for p in figures.all_figures(res, tmp_path / "figs")]
    assert keys[:3] == ["metrics_vs_axis0", "box_per_variant_point", "goodput_vs_throughput"]
    assert "cdf_per_run" in keys and "cdf_ooo_occupancy" in keys
    titles = {p.key: p.title for p in figures.all_figures(res, tmp_path / "figs")}
    assert titles["metrics_vs_axis0"] == (
        "OOO-BO (KB), OOO-R (%), LU (%), Throughput (Mbit/s), Goodput (Mbit/s) against "
        "wifi.distance_m (mean, 95 % t interval; no bar below n = 3)"
    )


def test_time_series_panels_per_subflow_throughput_rtt_cwnd_and_ooo() -> None:
    one = pd.DataFrame({"t_s": [0.0], "value": [1.0]})
    ts = {
        "throughput_bps": {"": one, "wifi": one},
        "srtt_ms": {"wifi": one},
        "cwnd": {"wifi": one},
        "ooo_bytes_max": {"": one},
        "pacing_rate_bps": {"wifi": one},
    }
    assert [p[1] for p in figures_timeseries.timeseries_panels(ts)] == [
        "throughput per subflow, capture (Mbit/s)",
        "srtt, ss (ms)",
        "cwnd, ss (packets)",
        "OOO queue, max per bin, capture (KB)",
    ]
    assert figures_timeseries.timeseries_panels({"cwnd": {"wifi": one}})[0][0] == "cwnd"


def test_the_traffic_window_is_marked_from_run_json_stages() -> None:
    timings = {"started": 100.0, "stages": {"setup": 6.649, "traffic": 6.544, "stop": 1.458}}
    assert figures_timeseries.traffic_window({"timings": timings}) == (6.649, pytest.approx(13.193))
    assert figures_timeseries.traffic_window({"timings": {"started": 1.0}}) is None
    assert figures_timeseries.traffic_window({}) is None


def one_point(variants: tuple[str, ...], distances: tuple[float, ...] = (70.0,)) -> results.Results:
    """Every variant at the same sweep points, three repetitions each (paper 000's 70 m)."""
    rows = [
        {
            "run_id": f"{v}-{d:g}-{rep}",
            "variant": v,
            "status": "complete",
            "repetition": rep,
            AXIS: d,
            "throughput_bps": (10 + i + rep / 10) * 1e6,
            "ooo_ratio": 0.1 if v != "tcp" else math.nan,  # plain TCP: no OOO-R line
        }
        for i, v in enumerate(variants)
        for d in distances
        for rep in (1, 2, 3)
    ]
    return results.Results(Path("/r"), "f", {"name": "f"}, (), results._derive(pd.DataFrame(rows)))


def drawn(ax) -> dict[str, tuple[list[float], str]]:  # type: ignore[no-untyped-def]
    """Line label -> (x of its markers, colour) as drawn on AX."""
    from matplotlib.colors import to_hex

    out = {}
    for container in ax.containers:
        line = container.lines[0]
        out[container.get_label()] = (
            [float(x) for x in line.get_xdata()],
            to_hex(line.get_color()),
        )
    return out


def panel(fig, ylabel: str):  # type: ignore[no-untyped-def]
    (ax,) = [ax for ax in fig.axes if ax.get_ylabel() == ylabel]
    return ax


def test_variants_at_a_single_sweep_point_are_drawn_apart() -> None:
    """Paper 000's and 003's scenario 1 have one distance: every marker sat on one x."""
    fig = figures.axis_figure(one_point(("a", "b", "c")), AXIS)
    ax = panel(fig, "Throughput (Mbit/s)")
    xs = {label: x for label, (x, _) in drawn(ax).items()}
    assert sorted(xs) == ["a", "b", "c"]
    assert len({x[0] for x in xs.values()}) == 3  # one position per variant
    assert xs["a"][0] < xs["b"][0] < xs["c"][0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["70"]  # the point, not 69.8 ...
    (tick,) = ax.get_xticks()
    assert sum(x[0] for x in xs.values()) / 3 == pytest.approx(tick)  # centred on it


def test_variants_are_dodged_around_every_sweep_point() -> None:
    fig = figures.axis_figure(one_point(("a", "b"), (10.0, 30.0, 50.0)), AXIS)
    xs = {label: x for label, (x, _) in drawn(panel(fig, "Throughput (Mbit/s)")).items()}
    assert all(a < b for a, b in zip(xs["a"], xs["b"], strict=True))
    middle = [(a + b) / 2 for a, b in zip(xs["a"], xs["b"], strict=True)]
    assert middle == pytest.approx([10.0, 30.0, 50.0])
    assert max(b - a for a, b in zip(xs["a"], xs["b"], strict=True)) <= 20 / 4  # near its x


def test_a_variant_keeps_its_colour_in_every_panel() -> None:
    """Plain TCP has no OOO-R: without a colour per variant the others shifted colour."""
    fig = figures.axis_figure(one_point(("a", "tcp", "z")), AXIS)
    ooo_r = drawn(panel(fig, "OOO-R (%)"))
    throughput = drawn(panel(fig, "Throughput (Mbit/s)"))
    assert sorted(ooo_r) == ["a", "z"] and sorted(throughput) == ["a", "tcp", "z"]
    assert {k: c for k, (_, c) in ooo_r.items()} == {
        k: c for k, (_, c) in throughput.items() if k != "tcp"
    }


def test_a_figure_drawn_twice_is_the_same_bytes(tmp_path: Path) -> None:
    """Committed figures change only when their data or the drawing code does."""
    res = one_point(("a", "b"))
    first = figures.axis_figures(res, tmp_path / "one")
    second = figures.axis_figures(res, tmp_path / "two")
    for a, b in zip(first, second, strict=True):
        assert (a.png.read_bytes(), a.svg.read_bytes()) == (b.png.read_bytes(), b.svg.read_bytes())
