"""`mprig report`: tables with t intervals, the paper layouts, outputs in every format,
failed, missing and flagged runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import report_synth as rs

from mprig.cli.main import main
from mprig.errors import UsageError
from reports import report, results
from reports import tables as tb

AXIS = "param.paths.wifi.distance_m"


def handmade() -> results.Results:
    """Two variants at one distance, three repetitions, exact numbers."""
    rows = []
    for variant, thr, ooo in (
        ("nopr", (10e6, 11e6, 12e6), 0.05),
        ("dsack", (20e6, 20e6, 20e6), 0.1),
    ):
        for rep, value in enumerate(thr, start=1):
            rows.append(
                {
                    "run_id": f"{variant}-{rep}",
                    "variant": variant,
                    "status": "complete",
                    "repetition": rep,
                    AXIS: 50.0,
                    "throughput_bps": value,
                    "goodput_bps": value / 2,
                    "ooo_ratio": ooo,
                    "ooo_max_bytes": 2048.0,
                    "link_util.wifi": 0.5,
                    "link_util.cell": 0.25,
                }
            )
    runs = results._derive(pd.DataFrame(rows))
    return results.Results(Path("/r"), "hand", {"name": "hand"}, (), runs)


def test_summary_table_mean_and_t_interval() -> None:
    t = tb.summary_table(handmade())
    assert list(t.display.columns) == [
        "variant",
        "wifi.distance_m",
        "OOO-BO (KB)",
        "OOO-R (%)",
        "LU (%)",
        "Throughput (Mbit/s)",
        "Goodput (Mbit/s)",
        "n",
    ]
    # nopr: mean 11, sd 1, t(0.975, 2) = 4.3027 -> half width 2.48 Mbit/s
    assert t.display.values.tolist() == [
        [
            "dsack",
            "50",
            "2.0\u00a0±\u00a00.0",
            "10.0\u00a0±\u00a00.0",
            "37.50\u00a0±\u00a00.00",
            "20.00\u00a0±\u00a00.00",
            "10.00\u00a0±\u00a00.00",
            "3",
        ],
        [
            "nopr",
            "50",
            "2.0\u00a0±\u00a00.0",
            "5.0\u00a0±\u00a00.0",
            "37.50\u00a0±\u00a00.00",
            "11.00\u00a0±\u00a02.48",
            "5.50\u00a0±\u00a01.24",
            "3",
        ],
    ]


def test_paper_table_is_paper_000_table_iii_layout() -> None:
    t = tb.paper_table(handmade())
    assert t is not None
    assert t.display.values.tolist() == [
        ["wifi.distance_m=50", "dsack", "2.0", "10.0", "37.50"],
        ["wifi.distance_m=50", "nopr", "2.0", "5.0", "37.50"],
    ]


def test_pivot_tables_put_points_in_columns() -> None:
    pivots = {t.key: t for t in tb.pivot_tables(handmade())}
    assert sorted(pivots) == [
        "pivot_goodput_bps",
        "pivot_link_util",
        "pivot_ooo_max_bytes",
        "pivot_ooo_ratio",
        "pivot_throughput_bps",
    ]
    thr = pivots["pivot_throughput_bps"].display
    assert [list(thr.columns), thr.values.tolist()] == [
        ["variant", "wifi.distance_m=50"],
        [["dsack", "20.00"], ["nopr", "11.00"]],
    ]


def test_zipped_axes_with_equal_values_count_once() -> None:
    hand = handmade()
    runs = hand.runs.assign(**{"param.paths.cell.distance_m": hand.runs[AXIS]})
    zipped = results.Results(hand.root, "zip", {}, (), runs)
    assert zipped.axes == [AXIS]
    apart = runs.assign(**{"param.paths.cell.distance_m": [10.0, 20.0, 30.0] * 2})
    assert results.Results(hand.root, "x", {}, (), apart).axes == [
        AXIS,
        "param.paths.cell.distance_m",
    ]


def test_a_campaign_without_sweep_has_no_pivots() -> None:
    hand = handmade()
    flat = results.Results(hand.root, "flat", {}, (), hand.runs.drop(columns=[AXIS]))
    assert [t.key for t in tb.all_tables(flat)] == ["summary", "paper", "runs"]
    assert tb.paper_table(flat).display.values.tolist()[0] == ["-", "dsack", "2.0", "10.0", "37.50"]  # type: ignore[union-attr]


def test_latex_is_booktabs_and_escaped() -> None:
    tex = tb.to_latex(tb.paper_table(handmade()))  # type: ignore[arg-type]
    assert tex.splitlines()[:7] == [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\caption{OOO-BO (KB) / OOO-R (\%) / LU (\%) per point and variant}",
        r"\begin{tabular}{llrrr}",
        r"\toprule",
        r"point & variant & OOO-BO (KB) & OOO-R (\%) & LU (\%) \\",
        r"\midrule",
    ]
    assert r"wifi.distance\_m=50 & dsack & 2.0 & 10.0 & 37.50 \\" in tex
    assert tex.rstrip().endswith(
        r"\bottomrule" "\n" r"\end{tabular}" "\n" r"\label{tab:paper}" "\n" r"\end{table}"
    )


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    s = rs.Synth(
        references=("000-t3-50m-nopr-*",),
        failed=("dsack-d10-r2",),
        dropped=("nopr-d50-r5",),
        flags={"nopr-d10-r1": ["capture_drops"]},
    )
    return rs.write(tmp_path_factory.mktemp("report") / "synth", s)


def test_cli_writes_every_format_and_prints_the_html_path_last(
    partial: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(partial)]) == 0
    out = capsys.readouterr().out.splitlines()
    html = partial / "report" / "report.html"
    assert out[1].startswith("  dsack @ wifi.distance_m=10: Throughput (Mbit/s) ")
    assert out[:1] + out[5:] == [
        "report synth: 18 complete, 1 failed, 1 missing runs",
        str(partial / "report" / "tables"),
        str(partial / "report" / "report.tex"),
        str(partial / "report" / "report.md"),
        str(html),
    ]
    assert sorted(p.name for p in (partial / "report" / "tables").iterdir()) == [
        "instruments.csv",
        "paper.csv",
        "pivot_goodput_bps.csv",
        "pivot_link_util.csv",
        "pivot_ooo_max_bytes.csv",
        "pivot_ooo_ratio.csv",
        "pivot_throughput_bps.csv",
        "references.csv",
        "runs.csv",
        "summary.csv",
    ]
    figures = sorted(p.name for p in (partial / "report" / "figures").glob("*.png"))
    assert figures == [
        "box_per_variant_point.png",
        "cdf_ooo_occupancy.png",
        "cdf_per_run.png",
        "goodput_vs_throughput.png",
        "metrics_vs_axis0.png",
        "timeseries_dsack-d10-r1.png",
        "timeseries_dsack-d50-r1.png",
        "timeseries_nopr-d10-r1.png",
        "timeseries_nopr-d50-r1.png",
    ]
    assert len(list((partial / "report" / "figures").glob("*.svg"))) == len(figures)


def test_report_lists_missing_failed_flagged_and_references(partial: Path) -> None:
    md = report.render_markdown(report.build(results.load(partial), [], []))
    assert "## Missing runs (partial campaign)\n\n| run_id | variant | point | repetition |\n" in md
    assert "| nopr-d50-r5 | nopr | wifi.distance_m=50 | 5 |" in md
    assert (
        "| dsack-d10-r2 | dsack | wifi.distance_m=10 | failed | iperf3 on client: "
        "connection refused after 3 attempts |"
    ) in md
    assert "| nopr-d10-r1 | capture_drops |  |" in md
    loaded = results.load(partial)
    from reports import references

    checks = references.load_for(loaded)
    assert [c.id for c in checks] == [
        "000-t3-50m-nopr-lu",
        "000-t3-50m-nopr-ooo-bo",
        "000-t3-50m-nopr-ooo-r",
    ]
    page = report.render_html(report.build(loaded, [], checks))
    assert [
        page.count(f'id="table-{t}"') for t in ("references", "missing", "failed", "warnings")
    ] == [1, 1, 1, 1]


def test_latex_report_starts_with_the_references(partial: Path) -> None:
    from reports import references

    loaded = results.load(partial)
    tex = report.render_latex(report.build(loaded, [], references.load_for(loaded)))
    lines = tex.splitlines()
    assert lines[:6] == [
        r"% mprig report of synth; needs \usepackage{booktabs}",
        r"\begin{table}[htbp]",
        r"\centering",
        r"\caption{Paper references: ours next to the paper's}",
        r"\begin{tabular}{llrrrrr}",
        r"\toprule",
    ]
    assert lines[6] == r"id & source & paper\_value & ours & unit & difference & verdict \\"
    assert lines[8].startswith(r"000-t3-50m-nopr-lu & Table III & 12.26 & ")


def test_environment_and_warnings(partial: Path) -> None:
    loaded = results.load(partial)
    env = {(e["host"], e["item"]): e["value"] for e in report.environment(loaded)}
    assert env == {
        ("client", "kernel"): "6.1.0-56-amd64",
        ("client", "iperf3"): "3.12",
        ("client", "tcpdump"): "4.99.3",
        ("server", "kernel"): "6.1.0-56-amd64",
        ("server", "iperf3"): "3.12",
        ("server", "tcpdump"): "4.99.3",
        ("rig", "mprig"): "0.1.0",
        ("rig", "rig_mode"): "virtual-vm",
        ("rig", "tcp metrics cache"): "not flushed (19 runs made before mprig flushed it)",
    }
    assert report.run_warnings(loaded) == [report.RunWarning("nopr-d10-r1", "capture_drops", "")]


def test_bad_format_and_missing_runs_parquet(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--format: unknown pdf; choose from html,md,tex,csv"):
        report.parse_formats("html,pdf")
    root = rs.write(tmp_path / "x", rs.Synth(timeseries=False))
    (root / "runs.parquet").unlink()
    with pytest.raises(UsageError) as e:
        results.load(root)
    assert str(e.value) == f"{root}/runs.parquet: not found; run `mprig collect {root}` first"


def test_newer_format_is_rejected(tmp_path: Path) -> None:
    root = rs.write(tmp_path / "x", rs.Synth(timeseries=False))
    (root / "campaign.json").write_text('{"format": 9, "spec": {"name": "x"}, "plan": []}')
    with pytest.raises(UsageError) as e:
        results.load(root)
    assert (
        str(e.value)
        == f"{root}/campaign.json: format 9 is newer than this mprig reads (1); upgrade mprig"
    )
