"""Issue 19 part 2: intervals a reviewer accepts (n too small below 3, Student-t from 3,
never below 0 for a non-negative quantity), cells that never wrap inside a value, and box
plots per (variant, sweep point)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import report_synth as rs

from reports import figures, results
from reports import tables as tb
from reports.stats import MIN_N, summary_ci

AXIS = "param.paths.wifi.distance_m"
NBSP = "\u00a0"


def test_below_three_values_there_is_no_interval() -> None:
    ci = summary_ci([10.0, 12.0])
    assert (ci.mean, math.isnan(ci.low), math.isnan(ci.high), ci.n, ci.method) == (
        11.0,
        True,
        True,
        2,
        "n too small",
    )
    assert MIN_N == 3


def test_from_three_values_a_student_t_interval() -> None:
    ci = summary_ci([10.0, 11.0, 12.0])
    # mean 11, sd 1, t(0.975, 2) = 4.3027
    assert (ci.mean, ci.low, ci.high, ci.n, ci.method) == (
        11.0,
        pytest.approx(11 - 4.3027 / math.sqrt(3), abs=1e-4),
        pytest.approx(11 + 4.3027 / math.sqrt(3), abs=1e-4),
        3,
        "t",
    )


def test_a_non_negative_quantity_is_clipped_at_zero_and_says_so() -> None:
    ci = summary_ci([0.0, 0.0, 3.0])
    assert (ci.low, ci.method, ci.clipped) == (0.0, "t, clipped at 0", True)
    free = summary_ci([0.0, 0.0, 3.0], nonnegative=False)
    assert free.low < 0 and not free.clipped


def frame(values: dict[str, list[float]]) -> results.Results:
    rows = []
    for variant, thr in values.items():
        for rep, value in enumerate(thr, start=1):
            rows.append(
                {
                    "run_id": f"{variant}-{rep}",
                    "variant": variant,
                    "status": "complete",
                    "repetition": rep,
                    AXIS: 50.0,
                    "throughput_bps": value,
                    "retransmitted_packets": [0.0, 0.0, 300.0][rep - 1] if len(thr) == 3 else 1.0,
                }
            )
    return results.Results(Path("/r"), "s", {"name": "s"}, (), results._derive(pd.DataFrame(rows)))


def test_summary_cells_say_n_too_small_clip_and_never_wrap() -> None:
    t = tb.summary_table(frame({"a": [10e6, 12e6], "b": [1_000e6, 1_200e6, 1_100e6]}))
    cells = dict(zip(t.display["variant"], t.display.to_dict("records"), strict=True))
    assert cells["a"]["Throughput (Mbit/s)"] == f"11.00,{NBSP}n{NBSP}too{NBSP}small"
    assert cells["b"]["Throughput (Mbit/s)"] == (f"1\u202f100.00{NBSP}±{NBSP}248.41")
    # retransmissions 0, 0, 300: t interval [-330, 530] clipped to [0, 530]
    assert cells["b"]["Retransmitted (pkts)"] == f"100{NBSP}[0,{NBSP}530]"
    for row in t.display.to_dict("records"):
        assert not any(" " in str(v) for v in row.values())
    long = t.data.set_index(["variant", "metric"])
    assert long.loc[("b", "retransmitted_packets"), "ci_method"] == "t, clipped at 0"
    assert long.loc[("a", "throughput_bps"), "ci_method"] == "n too small"
    assert "clipped at 0" in t.note and "n too small" in t.note


def test_html_and_latex_keep_values_whole() -> None:
    t = tb.summary_table(frame({"b": [1_000e6, 1_200e6, 1_100e6]}))
    assert tb.to_html(t).startswith(
        '<table id="table-summary" class="data" style="white-space:nowrap">'
    )
    tex = tb.to_latex(t)
    assert r"1\,100.00~$\pm$~248.41" in tex


def test_box_plots_are_per_variant_and_sweep_point(tmp_path: Path) -> None:
    res = results.load(rs.write(tmp_path / "c", rs.Synth(repetitions=3)))
    groups = figures.box_groups(res, "throughput_bps")
    assert [label for label, _ in groups] == [
        "dsack\n10",
        "dsack\n50",
        "nopr\n10",
        "nopr\n50",
    ]
    assert [len(values) for _, values in groups] == [3, 3, 3, 3]
    plot = figures.box_figure(res, tmp_path / "figs")
    assert plot is not None and plot.title == (
        "Rates per variant and sweep point (box: quartiles, whiskers 1.5 IQR)"
    )


def test_terminal_summary_prints_the_report_numbers_with_their_spread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mprig.cli.main import main

    root = rs.write(tmp_path / "c", rs.Synth(repetitions=3, timeseries=False))
    assert main(["report", str(root), "--format", "csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    table = tb.summary_table(results.load(root)).display
    first = table.iloc[0]
    shown = [c for c in tb.TERMINAL if c in table.columns]  # no competing flow: no Jain's index
    assert len(shown) == 4
    cells = [f"{c} {first[c]}".replace(NBSP, " ").replace("\u202f", " ") for c in shown]
    assert out[1] == f"  dsack @ wifi.distance_m=10: {'; '.join(cells)}; n 3"
    assert len(out) == 1 + 4 + 1  # counts, 2 variants x 2 points, the tables directory
