"""`mprig compare` on seeded synthetic result sets: verdicts, outputs, exit status, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import report_synth as rs

from mprig.cli.main import main
from mprig.errors import UsageError
from reports import compare, compare_render, results


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    return {
        "base": rs.write(root / "base", rs.Synth(timeseries=False, noise=1)),
        "same": rs.write(root / "same", rs.Synth(timeseries=False, noise=2)),
        "drop": rs.write(
            root / "drop", rs.Synth(timeseries=False, noise=3, scale={"goodput_bps": 0.8})
        ),
    }


def test_same_distribution_has_no_regression(sets: dict[str, Path]) -> None:
    c = compare.compare(results.load(sets["base"]), results.load(sets["same"]))
    assert c.exit_code == 0
    assert c.regressions == []
    assert compare_render.summary_line(c) == (
        f"OK ({len({r.metric for r in c.rows})} metrics, 0 regressions; {compare_render.spread(c)})"
    )
    # 2 variants x 2 distances for every metric with data
    assert len(c.rows) == 4 * len({r.metric for r in c.rows})


def test_goodput_drop_is_a_regression(sets: dict[str, Path]) -> None:
    c = compare.compare(results.load(sets["base"]), results.load(sets["drop"]))
    regressed = sorted(
        (r.metric, r.variant, r.point["param.paths.wifi.distance_m"]) for r in c.regressions
    )
    # the synthetic iperf3 figure is 99 % of goodput, so it drops with it
    assert regressed == [
        (m, v, d)
        for m in ("goodput_bps", "iperf3_bps")
        for v in ("dsack", "nopr")
        for d in (10.0, 50.0)
    ]
    assert c.exit_code == 1
    line = compare_render.summary_line(c)
    assert line.split()[:2] in (["REGRESSION", "goodput_bps"], ["REGRESSION", "iperf3_bps"])
    assert line.endswith("(+7 more)")


def test_cli_writes_md_json_html_and_exits_1(
    sets: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare", str(sets["base"]), str(sets["drop"]), "--out", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[:3] == [str(tmp_path / f) for f in ("compare.md", "compare.json", "compare.html")]
    assert out[-1].startswith("REGRESSION ")
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert (doc["campaign"], doc["tolerance"], doc["regressions"]) == ("synth", 0.05, 8)
    assert (
        "| goodput_bps | dsack @ wifi.distance_m=10 | 5/5 |"
        in (tmp_path / "compare.md").read_text()
    )
    assert 'id="table-compare"' in (tmp_path / "compare.html").read_text()


def test_cli_exit_0_without_regression(
    sets: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "compare",
            str(sets["base"]),
            str(sets["same"]),
            "--format",
            "json",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK (")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.json"]


def test_different_specs_name_the_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = rs.write(tmp_path / "a", rs.Synth(timeseries=False))
    b = rs.write(tmp_path / "b", rs.Synth(timeseries=False, repetitions=4, distances=(10.0, 60.0)))
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "mprig: error: campaign 'synth' differs between baseline and current in: "
        "repetitions, sweep.axes.paths.wifi.distance_m; compare results of the same campaign spec"
    )


def test_different_campaign_names(tmp_path: Path) -> None:
    a = rs.write(tmp_path / "a", rs.Synth(timeseries=False, name="one"))
    b = rs.write(tmp_path / "b", rs.Synth(timeseries=False, name="two"))
    with pytest.raises(
        UsageError, match=r"different campaigns: baseline .* is 'one', current .* is 'two'"
    ):
        compare.compare(results.load(a), results.load(b))


def test_missing_metric_is_named(tmp_path: Path) -> None:
    a = rs.write(tmp_path / "a", rs.Synth(timeseries=False))
    b = rs.write(
        tmp_path / "b", rs.Synth(timeseries=False, omit_metrics=("ooo_ratio", "goodput_bps"))
    )
    with pytest.raises(UsageError) as e:
        compare.compare(results.load(a), results.load(b))
    assert str(e.value) == (
        f"current {b} is missing metrics goodput_bps, ooo_ratio; "
        "collect both result sets with the same mprig version (a nightly baseline kept by "
        "an earlier mprig cannot be collected again: delete it, the next night sets it)"
    )


def test_partial_campaign_lists_missing_runs(tmp_path: Path) -> None:
    a = rs.write(tmp_path / "a", rs.Synth(timeseries=False))
    b = rs.write(
        tmp_path / "b", rs.Synth(timeseries=False, dropped=("nopr-d10-r2", "dsack-d50-r5"))
    )
    with pytest.raises(UsageError) as e:
        compare.compare(results.load(a), results.load(b))
    assert str(e.value) == (
        f"current {b} is a partial campaign: 2 planned runs missing (nopr-d10-r2, "
        "dsack-d50-r5); finish it with `mprig run` and `mprig collect`"
    )


def test_too_few_complete_runs(tmp_path: Path) -> None:
    a = rs.write(tmp_path / "a", rs.Synth(timeseries=False, repetitions=2))
    b = rs.write(tmp_path / "b", rs.Synth(timeseries=False, repetitions=2, failed=("nopr-d50-r1",)))
    with pytest.raises(UsageError) as e:
        compare.compare(results.load(a), results.load(b))
    assert str(e.value) == (
        "too few complete runs for nopr at wifi.distance_m=50: baseline 2, current 1 "
        "(need 2 each); see the failed runs in each report"
    )


def test_not_a_results_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(tmp_path), str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"mprig: error: {tmp_path}/campaign.json: not found; "
        "is this a results directory of `mprig run`?"
    )


def test_metrics_undefined_for_a_variant_are_skipped(tmp_path: Path) -> None:
    """A TCP variant has no OOO metrics: its rows are left out, not an error."""
    tcp = {"dsack": ("ooo_ratio", "ooo_max_bytes")}
    a = rs.write(tmp_path / "a", rs.Synth(timeseries=False, undefined=tcp))
    b = rs.write(tmp_path / "b", rs.Synth(timeseries=False, noise=2, undefined=tcp))
    c = compare.compare(results.load(a), results.load(b))
    assert sorted({r.variant for r in c.rows if r.metric == "ooo_ratio"}) == ["nopr"]
    assert sorted({r.variant for r in c.rows if r.metric == "goodput_bps"}) == ["dsack", "nopr"]
    only_base = rs.write(tmp_path / "c", rs.Synth(timeseries=False, noise=3))
    with pytest.raises(UsageError) as e:
        compare.compare(results.load(only_base), results.load(b))
    assert str(e.value) == (
        "metric ooo_max_bytes of dsack at wifi.distance_m=10 has values in baseline only; "
        "collect both result sets with the same mprig version"
    )


def test_a_point_whose_runs_all_failed(tmp_path: Path) -> None:
    a = rs.write(tmp_path / "a", rs.Synth(timeseries=False))
    failed = tuple(f"nopr-d50-r{i}" for i in range(1, 6))
    b = rs.write(tmp_path / "b", rs.Synth(timeseries=False, failed=failed))
    with pytest.raises(UsageError) as e:
        compare.compare(results.load(a), results.load(b))
    assert str(e.value) == (
        "too few complete runs for nopr at wifi.distance_m=50: baseline 5, current 0 "
        "(need 2 each); see the failed runs in each report"
    )
