"""A campaign whose runs span kernels says so: a full profile runs over days and the host's
kernel can be updated between its shards (000-scenario2-full's first 63 runs ran on Debian's
6.1.0-56-amd64, the next ones on 6.1.0-57-amd64 after the machine was updated), and its cells
pool both. The reproduction keeps which run ran on which (metrics' `kernel` column), counts
them per campaign (environment.json) and names the mix in report.md; a committed
reproduction judged again from its own files writes the same report.md."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import paper_synth as ps
import pytest

from reports import reproduce

OLD, NEW = "6.1.0-56-amd64", "6.1.0-57-amd64"


def _reproduce(tmp: Path, kernels: tuple[str | dict[str, str], ...]) -> Path:
    results = tmp / "results"
    ps.write(results / "000-table1-full", "000-table1-full", repetitions=5, kernels=kernels)
    out = tmp / "reproductions"
    reproduce.reproduce("000", "full", results, out, run=False, partial=True)
    return out / "000"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reproduce(tmp_path_factory.mktemp("mixed"), (OLD, NEW))


def test_each_runs_kernel_is_a_column_of_the_metrics(mixed: Path) -> None:
    metrics = pd.read_parquet(mixed / "metrics.parquet")
    assert metrics["kernel"].value_counts().to_dict() == {OLD: 30, NEW: 30}
    assert pd.read_csv(mixed / "metrics.csv")["kernel"].tolist() == metrics["kernel"].tolist()
    # ps.write gives run i of the plan kernels[index % 2]
    assert (metrics["kernel"] == metrics["index"].map(lambda i: (OLD, NEW)[i % 2])).all()


def test_environment_counts_a_campaigns_runs_per_kernel(mixed: Path) -> None:
    env = json.loads((mixed / "environment.json").read_text())
    assert env["kernels"] == [OLD, NEW]
    assert env["campaigns"]["000-table1-full"]["kernels"] == {OLD: 30, NEW: 30}


def test_the_report_names_the_mix_under_the_campaign(mixed: Path) -> None:
    text = (mixed / "report.md").read_text()
    section = text.split("## 000-table1-full", 1)[1].split("\n## ", 1)[0]
    line = f"Its complete runs ran on 2 kernels: {OLD} (30 runs), {NEW} (30 runs)"
    assert line in section, section[:600]
    assert "`kernel` column" in section  # where to split them


def test_one_kernel_adds_no_line(tmp_path: Path) -> None:
    one = _reproduce(tmp_path, (NEW,))
    assert "kernels:" not in (one / "report.md").read_text()
    env = json.loads((one / "environment.json").read_text())
    assert env["campaigns"]["000-table1-full"]["kernels"] == {NEW: 60}


def test_a_lab_whose_hosts_differ_is_one_set_not_a_mix(tmp_path: Path) -> None:
    """Client and server on different kernels in every run: one combination, no mix."""
    one = _reproduce(tmp_path, ({"client": OLD, "server": NEW},))
    env = json.loads((one / "environment.json").read_text())
    assert env["campaigns"]["000-table1-full"]["kernels"] == {f"{OLD}, {NEW}": 60}
    assert "kernels:" not in (one / "report.md").read_text()


def test_judged_again_from_its_own_files_the_report_is_the_same(
    mixed: Path, tmp_path: Path
) -> None:
    before, after = ps.rejudged(mixed, tmp_path)
    assert "ran on 2 kernels" in before
    assert after == before
