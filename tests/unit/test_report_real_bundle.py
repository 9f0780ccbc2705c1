"""collect -> report -> compare on a real run bundle (tests/captures/test_collect/
mptcp_download, recorded by tests/integration/realbundle.py): three repetitions made of
copies of it, and a fourth run planned but missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mprig.cli.main import main
from mprig.run import bundle
from reports import figures_timeseries, results

FIXTURE = Path(__file__).parents[1] / "captures" / "test_collect" / "mptcp_download"
REPS = 3


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("real") / "real"
    record = json.loads((FIXTURE / "run.json").read_text())
    plan = []
    for rep in range(1, REPS + 2):
        run_id = f"mptcp-r{rep}"
        plan.append(
            {
                "run_id": run_id,
                "index": rep - 1,
                "repetition": rep,
                "point": {},
                "variant": record["variant"],
            }
        )
        if rep > REPS:
            continue  # planned, never run: a partial campaign
        shutil.copytree(FIXTURE, root / run_id)
        (root / run_id / "label.txt").write_text(run_id)  # each run its own artifacts
        copy = record | {"run_id": run_id, "campaign": "real", "repetition": rep, "index": rep - 1}
        copy["artifacts"] = record["artifacts"] | {
            "label.txt": bundle.sha256_file(root / run_id / "label.txt")
        }
        (root / run_id / "run.json").write_text(json.dumps(copy))
    spec = {"name": "real", "variants": [record["variant"]], "paths": record["paths"]}
    (root / "campaign.json").write_text(json.dumps({"format": 1, "spec": spec, "plan": plan}))
    assert main(["collect", str(root), "--quiet"]) == 0
    return root


def test_report_of_collected_real_runs(campaign: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["report", str(campaign), "--format", "md,csv"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[0]
        == "report real: 3 complete, 0 failed, 1 missing runs"
    )
    runs = pd.read_parquet(campaign / "runs.parquet")
    thr = float(runs["throughput_bps"].iloc[0])
    assert runs["throughput_bps"].tolist() == [thr] * REPS and thr > 0
    md = (campaign / "report" / "report.md").read_text()
    mbit = f"{thr / 1e6:.2f}"
    nbsp = "\u00a0"  # a cell never wraps inside a value
    assert f"| mptcp | {runs['ooo_max_bytes'].iloc[0] / 1024:.1f}{nbsp}±{nbsp}0.0 |" in md
    assert f"| {mbit}{nbsp}±{nbsp}0.00 |" in md
    assert "| mptcp-r4 | mptcp | - | 4 |" in md  # the missing run
    summary = pd.read_csv(campaign / "report" / "tables" / "summary.csv")
    row = summary[summary["metric"] == "throughput_bps"].iloc[0]
    assert (row["variant"], row["mean"], row["n"]) == ("mptcp", pytest.approx(thr), REPS)


def test_timeseries_of_a_real_run(campaign: Path) -> None:
    series = figures_timeseries.read_timeseries(campaign / "mptcp-r1" / "timeseries.parquet")
    assert sorted(series["cwnd"]) == ["cell", "wifi"]
    assert "ooo_bytes_max" in series
    plots = figures_timeseries.timeseries_figures(results.load(campaign), campaign / "figs")
    assert [p.key for p in plots] == ["timeseries_mptcp-r1"]


def test_compare_refuses_the_partial_campaign(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(campaign), str(campaign)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"mprig: error: baseline {campaign} is a partial campaign: 1 planned runs missing "
        "(mptcp-r4); finish it with `mprig run` and `mprig collect`"
    )
