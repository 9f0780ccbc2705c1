"""`mprig nightly` on collected synthetic nights: baseline, OK, regression and error
verdict lines, the history parquet, the trend figure and pruning old nights."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import report_synth as rs

from mprig.cli.main import main
from reports import nightly


def night(tmp: Path, date: str, **kw: object) -> Path:
    return rs.write(tmp / "nights" / date / "synth", rs.Synth(timeseries=False, **kw))  # type: ignore[arg-type]


def cli(
    tmp: Path, date: str, results: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str]]:
    code = main(
        [
            "nightly",
            "experiments/nightly.yaml",
            "--baseline",
            str(tmp / "baseline"),
            "--history",
            str(tmp / "history"),
            "--date",
            date,
            "--from-results",
            str(results),
        ]
    )
    return code, capsys.readouterr().out.splitlines()


def test_nights_baseline_ok_regression_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = night(tmp_path, "2026-11-19", noise=1)
    assert cli(tmp_path, "2026-11-19", first, capsys) == (
        0,
        [f"nightly 2026-11-19: BASELINE set to {tmp_path / 'baseline'}"],
    )
    kept = sorted(
        str(p.relative_to(tmp_path / "baseline"))
        for p in (tmp_path / "baseline").rglob("*")
        if p.is_file()
    )
    # baseline.json: the sha256 of what is kept (the artifacts stay behind)
    assert kept[:3] == ["baseline.json", "campaign.json", "dsack-d10-r1/run.json"]
    assert "runs.parquet" in kept and len(kept) == 3 + 20

    code, out = cli(tmp_path, "2026-11-20", night(tmp_path, "2026-11-20", noise=2), capsys)
    history = pd.read_parquet(tmp_path / "history" / "history.parquet")
    metrics = history["metric"].nunique()
    head = f"nightly 2026-11-20: OK ({metrics} metrics, 0 regressions; changes "
    # 5 % spread: a 15 % change needs more than the night's 5 repetitions, and it says so
    warning = re.search(
        r" underpowered\); WARNING: 5 repetitions, (\d+) needed to find a 15 % change "
        r"\((throughput_bps|goodput_bps) spread [\d.]+ % over (\d+) nights and points\)$",
        out[0],
    )
    assert (code, len(out), out[0].startswith(head), warning is not None) == (0, 1, True, True)
    assert warning is not None and int(warning[1]) > 5 and int(warning[3]) == 4
    assert history["cv_current"].notna().any()
    assert len(history) == 4 * metrics  # 2 variants x 2 distances per metric
    assert (tmp_path / "history" / "trend.png").is_file()
    # the trend draws every metric of the history, the headline ones first
    shown = nightly.trend_metrics(history)
    assert shown[:3] == ["goodput_bps", "throughput_bps", "ooo_ratio"]
    assert sorted(shown) == sorted(history["metric"].unique())
    assert (tmp_path / "nights" / "2026-11-20" / "synth" / "report" / "report.html").is_file()
    assert (tmp_path / "nights" / "2026-11-20" / "synth" / "compare" / "compare.json").is_file()

    code, out = cli(
        tmp_path,
        "2026-11-21",
        night(tmp_path, "2026-11-21", noise=3, scale={"throughput_bps": 0.8}),
        capsys,
    )
    assert code == 1 and len(out) == 1
    assert out[0].startswith("nightly 2026-11-21: REGRESSION ")
    history = pd.read_parquet(tmp_path / "history" / "history.parquet")
    tonight = history[history["date"] == "2026-11-21"]
    # goodput and iperf3 follow throughput in the synthetic model
    assert sorted(set(tonight.loc[tonight["verdict"] == "regression", "metric"])) == [
        "goodput_bps",
        "iperf3_bps",
        "link_util",
        "link_util.cell",
        "link_util.wifi",
        "throughput_bps",
        "throughput_bps.cell",
        "throughput_bps.wifi",
    ]

    other = rs.write(
        tmp_path / "nights" / "2026-11-22" / "other", rs.Synth(name="other", timeseries=False)
    )
    code, out = cli(tmp_path, "2026-11-22", other, capsys)
    assert code == 2
    assert out == [
        f"nightly 2026-11-22: ERROR different campaigns: baseline {tmp_path / 'baseline'} "
        f"is 'synth', current {other} is 'other'"
    ]
    history = pd.read_parquet(tmp_path / "history" / "history.parquet")
    assert list(history["date"].drop_duplicates()) == ["2026-11-20", "2026-11-21", "2026-11-22"]
    assert history.loc[history["date"] == "2026-11-22", "verdict"].str.startswith(
        "error: different"
    ).tolist() == [True]


def test_a_broken_first_night_does_not_become_the_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = tuple(f"dsack-d10-r{i}" for i in range(1, 5))
    broken = night(tmp_path, "2026-11-19", failed=failed)
    code, out = cli(tmp_path, "2026-11-19", broken, capsys)
    assert (code, out) == (
        2,
        [
            f"nightly 2026-11-19: ERROR tonight's results {broken} have 1 complete runs for dsack "
            "at wifi.distance_m=10 (need 2); see the failed runs in the report"
        ],
    )
    assert not (tmp_path / "baseline").exists()
    history = pd.read_parquet(tmp_path / "history" / "history.parquet")
    assert history["verdict"].str.startswith("error: tonight's results").tolist() == [True]


def test_rerunning_a_night_replaces_its_rows(tmp_path: Path) -> None:
    rows = [{"date": "2026-11-20", "metric": "m", "variant": "v", "point": "-", "verdict": "ok"}]
    nightly.append_history(tmp_path, rows)
    nightly.append_history(tmp_path, [{**rows[0], "verdict": "regression"}])
    nightly.append_history(tmp_path, [{**rows[0], "date": "2026-11-21"}])
    frame = pd.read_parquet(tmp_path / "history.parquet")
    assert frame[["date", "verdict"]].values.tolist() == [
        ["2026-11-20", "regression"],
        ["2026-11-21", "ok"],
    ]


def test_run_and_collect_commands() -> None:
    import sys

    n = Path("/n/2026-11-21")
    assert nightly.commands(Path("x.yaml"), n, n / "nightly", "h6") == [
        [
            sys.executable,
            "-m",
            "mprig.cli",
            "run",
            "x.yaml",
            "--results",
            str(n),
            "--quiet",
            "--rig",
            "h6",
        ],
        [sys.executable, "-m", "mprig.cli", "collect", str(n / "nightly"), "--quiet"],
    ]


def test_prune_keeps_the_newest_nights_only(tmp_path: Path) -> None:
    for name in ("2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21", "notes"):
        (tmp_path / name).mkdir()
    removed = nightly.prune(tmp_path, 2)
    assert [p.name for p in removed] == ["2026-11-18", "2026-11-19"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2026-11-20", "2026-11-21", "notes"]
    assert nightly.prune(tmp_path, 0) == []


def test_bad_campaign_file_is_an_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\npaths: []\n")
    code = main(
        [
            "nightly",
            str(bad),
            "--baseline",
            str(tmp_path / "b"),
            "--history",
            str(tmp_path / "h"),
            "--results",
            str(tmp_path / "n"),
            "--date",
            "2026-11-21",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 2 and len(out) == 1
    assert out[0].startswith(f"nightly 2026-11-21: ERROR {bad}:")


def test_bad_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nightly", "x.yaml", "--baseline", "b", "--history", "h", "--date", "21.11."]) == 2
    assert (
        capsys.readouterr().err.strip() == "mprig: error: --date must be YYYY-MM-DD, got '21.11.'"
    )
