"""Issue 19 part 3, the figures still missing: overlays of two campaigns (or kernels),
latency CDFs per sample, and events marked on a run's time series."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import report_synth as rs

from mprig.cli.main import main
from mprig.errors import UsageError
from reports import figures, figures_timeseries, overlay, results


def campaign(root: Path, **kw: object) -> results.Results:
    return results.load(rs.write(root, rs.Synth(repetitions=3, **kw)))  # type: ignore[arg-type]


def with_kernel(res: results.Results, kernel: str) -> results.Results:
    bundles = {
        run_id: {**b, "hosts": {h: {**f, "kernel": kernel} for h, f in b["hosts"].items()}}
        for run_id, b in res.bundles.items()
    }
    return replace(res, bundles=bundles)


def test_overlay_labels_name_and_kernel_and_draws_one_figure_per_shared_axis(
    tmp_path: Path,
) -> None:
    a = with_kernel(campaign(tmp_path / "a"), "6.1.0-56-amd64")
    b = with_kernel(campaign(tmp_path / "b", noise=2), "6.12.9-mptcp")
    assert overlay.campaign_labels([a, b]) == [
        "synth, kernel 6.1.0-56-amd64",
        "synth, kernel 6.12.9-mptcp",
    ]
    plots = overlay.overlay_figures([a, b], tmp_path / "fig")
    assert [(p.key, p.png.is_file(), p.svg.is_file()) for p in plots] == [
        ("overlay_vs_axis0", True, True)
    ]
    assert plots[0].title.startswith(
        "Overlay of synth, kernel 6.1.0-56-amd64 / synth, kernel 6.12.9-mptcp against "
        "wifi.distance_m"
    )


def test_same_campaign_twice_is_told_apart_by_its_directory(tmp_path: Path) -> None:
    a, b = campaign(tmp_path / "a"), campaign(tmp_path / "b", noise=2)
    assert overlay.campaign_labels([a, b]) == [
        f"synth, kernel 6.1.0-56-amd64 ({tmp_path / 'a'})",
        f"synth, kernel 6.1.0-56-amd64 ({tmp_path / 'b'})",
    ]


def test_campaigns_without_a_shared_axis_are_an_error_naming_both(tmp_path: Path) -> None:
    a = campaign(tmp_path / "a")
    runs = a.runs.rename(columns={"param.paths.wifi.distance_m": "param.paths.cell.delay_ms"})
    b = replace(a, root=tmp_path / "b", runs=runs)
    with pytest.raises(UsageError, match="share no sweep axis") as e:
        overlay.shared_axes([a, b])
    assert str(e.value) == (
        "--overlay: the campaigns share no sweep axis to draw against "
        f"({tmp_path / 'a'}: wifi.distance_m; {tmp_path / 'b'}: cell.delay_ms)"
    )


def test_report_cli_overlay_puts_the_figure_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = rs.write(tmp_path / "a", rs.Synth(repetitions=3, timeseries=False))
    b = rs.write(tmp_path / "b", rs.Synth(repetitions=3, timeseries=False, noise=3))
    code = main(["report", str(a), "--overlay", str(b), "--format", "html,md"])
    assert code == 0
    md = (a / "report" / "report.md").read_text()
    assert "![Overlay of synth, kernel 6.1.0-56-amd64 (" in md
    assert "(figures/overlay_vs_axis0.png)" in md
    assert capsys.readouterr().out.splitlines()[-1] == str(a / "report" / "report.html")


def test_report_cli_overlay_of_a_missing_directory_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = rs.write(tmp_path / "a", rs.Synth(repetitions=3, timeseries=False))
    assert main(["report", str(a), "--overlay", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope' / 'campaign.json'}: not found" in capsys.readouterr().err


def series_frame(rows: list[tuple[float, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["t", "metric", "path", "value"]).assign(source="ss")


def test_latency_cdf_takes_every_rtt_and_block_delay_sample(tmp_path: Path) -> None:
    res = campaign(tmp_path / "a", variants=("nopr",), distances=(10.0,))
    for i, run_id in enumerate(sorted(res.complete["run_id"])):
        series_frame(
            [(0.1, "srtt_ms", "wifi", 10.0 + i), (0.2, "srtt_ms", "cell", 40.0 + i),
             (0.3, "block_delay_s", "", 0.05 * (i + 1)), (0.1, "cwnd", "wifi", 9.0)]
        ).to_parquet(res.root / run_id / "timeseries.parquet")  # fmt: skip
    samples = figures.series_samples(res, ("srtt_ms", "block_delay_s"))
    got = {name: {v: sorted(a.tolist()) for v, a in s.items()} for name, s in samples.items()}
    assert got == {
        "srtt_ms": {"nopr": [10.0, 11.0, 12.0, 40.0, 41.0, 42.0]},
        "block_delay_s": {"nopr": pytest.approx([0.05, 0.10, 0.15])},
    }
    plot = figures.cdf_latency_figure(res, tmp_path / "fig")
    assert plot is not None and (plot.key, plot.png.is_file()) == ("cdf_latency", True)
    assert "RTT per ss sample" in plot.title and "delay per block" in plot.title


def test_no_latency_samples_no_figure(tmp_path: Path) -> None:
    res = campaign(tmp_path / "a", variants=("nopr",), distances=(10.0,), timeseries=False)
    assert figures.cdf_latency_figure(res, tmp_path / "fig") is None


def test_retransmissions_are_where_the_ss_counter_grew() -> None:
    t = [0.1, 0.2, 0.3, 0.4, 0.5]
    ts = {"retrans": {"wifi": pd.DataFrame({"t_s": t, "value": [0, 0, 2, 2, 3]}),
                      "cell": pd.DataFrame({"t_s": t[:2], "value": [1, 1]})}}  # fmt: skip
    assert figures_timeseries.retransmission_events(ts) == [
        figures_timeseries.Event(0.3, "retransmission (ss)", "wifi"),
        figures_timeseries.Event(0.5, "retransmission (ss)", "wifi"),
    ]


def test_rbpm_actions_are_events_from_the_run_start() -> None:
    lines = [
        {"t": 1000.0, "event": "start", "role": "receiver", "port": 5201, "interval": 0.2},
        {"t": 1001.5, "event": "step", "decision": {"action": "none"}},
        {"t": 1002.25, "event": "step", "decision": {"action": "backup", "targets": ["a:1"]}},
        {"t": 1004.0, "event": "step", "decision": {"action": "nobackup"}},
    ]
    text = "\n".join(json.dumps(x) for x in lines)
    assert figures_timeseries.rbpm_events(text, started=1000.0) == [
        figures_timeseries.Event(2.25, "RBPM backup", ""),
        figures_timeseries.Event(4.0, "RBPM nobackup", ""),
    ]


def test_a_broken_rbpm_log_is_an_error_naming_file_and_line() -> None:
    with pytest.raises(UsageError) as e:
        figures_timeseries.rbpm_events(
            '{"t": 1, "event": "start"}\n{"t": 2, "ev', 0.0, "r1/rbpm.jsonl"
        )
    assert str(e.value).startswith("r1/rbpm.jsonl:2: not an RBPM log line (")


def test_timeseries_figure_marks_the_events(tmp_path: Path) -> None:
    res = campaign(tmp_path / "a", variants=("nopr",), distances=(10.0,))
    run_id = sorted(res.complete["run_id"])[0]
    series_frame(
        [(t, "cwnd", "wifi", 10.0) for t in np.arange(0, 1, 0.1)]
        + [(0.1, "retrans", "wifi", 0.0), (0.6, "retrans", "wifi", 4.0)]
    ).to_parquet(res.root / run_id / "timeseries.parquet")
    ts = figures_timeseries.read_timeseries(res.root / run_id / "timeseries.parquet")
    assert figures_timeseries.run_events(res, run_id, ts) == [
        figures_timeseries.Event(0.6, "retransmission (ss)", "wifi")
    ]
    plots = [
        p for p in figures_timeseries.timeseries_figures(res, tmp_path / "fig") if run_id in p.key
    ]
    assert [p.png.is_file() for p in plots] == [True]
