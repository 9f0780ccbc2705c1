"""`mprig reproduce --min-n K`: a core or full reproduction once every cell (variant x sweep
point) of every campaign holds K runs, though not every planned repetition ran; refused
while one cell holds fewer, and the report and environment.json give the n per cell."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import paper_synth as ps
import pytest

from mprig.cli import main as cli
from mprig.errors import UsageError
from reports import paperplans, reproduce, reproduce_docs, reproduce_gaps, results


def keep(root: Path, predicate: object) -> None:
    """Leave in ROOT's runs.parquet only the runs whose (run_id, repetition) PREDICATE takes:
    the others are planned runs that have not run (yet)."""
    runs = pd.read_parquet(root / "runs.parquet")
    plan = {p["run_id"]: p["repetition"] for p in results.load(root).planned}
    mask = [bool(predicate(r, plan[r])) for r in runs["run_id"]]  # type: ignore[operator]
    runs[mask].to_parquet(root / "runs.parquet")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Paper 004's full campaigns at 3 planned repetitions, of which 004-fig4-full ran 2 of
    every cell and the others all 3 (complete)."""
    root = tmp_path_factory.mktemp("min-n") / "results"
    for stem in paperplans.PAPERS["004"].campaigns:
        ps.write(root / f"{stem}-full", f"{stem}-full", repetitions=3)
    keep(root / "004-fig4-full", lambda run_id, rep: rep <= 2)
    return root


@pytest.fixture
def three_reps(written: Path, tmp_path: Path) -> Path:
    """A copy of `written` for one test to change."""
    return Path(shutil.copytree(written, tmp_path / "results"))


def test_cells_count_the_runs_each_variant_at_each_point_holds(three_reps: Path) -> None:
    fig4 = results.load(three_reps / "004-fig4-full")
    assert reproduce_gaps.cell_runs(fig4) == (2, 2, 3)
    assert reproduce_gaps.cell_runs(results.load(three_reps / "004-fig6c-full")) == (3, 3, 3)


def test_a_reproduction_at_n_2_of_3_is_written_and_says_so(
    three_reps: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with pytest.raises(UsageError, match="not complete"):
        reproduce.reproduce("004", "full", three_reps, out, run=False)
    with pytest.raises(UsageError) as refused:
        reproduce.reproduce("004", "full", three_reps, out, run=False, min_n=3)
    assert "has cells with fewer than 3 runs: 004-fig4-full: 63 of 189 planned runs never ran" in (
        str(refused.value)
    )
    assert "a cell holds 2 complete runs of its 3" in str(refused.value) and "004-fig6c" not in str(
        refused.value
    )
    assert not (out / "004").exists()

    report = reproduce.reproduce("004", "full", three_reps, out, run=False, min_n=2)
    gap = "004-fig4-full: 63 of 189 planned runs never ran (a cell holds 2 complete runs of its 3)"
    assert gap in report.read_text().splitlines()[2]
    env = json.loads((out / "004" / "environment.json").read_text())
    assert (env["incomplete"], env["cells"]) == ([gap], {"fewest": 2, "planned": 3})
    assert "| 004 | full, n ≥ 2 of 3 | " in reproduce_docs.docs_section(out)
    verdicts = json.loads((out / "004" / "verdicts.json").read_text())
    fills = next(c for c in verdicts["checks"] if c["id"] == "004-rcvbuf-fills-both")
    assert fills["n"] == 2


def test_a_campaign_without_results_is_a_cell_at_n_0(three_reps: Path, tmp_path: Path) -> None:
    """environment.json's `cells` counts a campaign of the profile with no results as n = 0,
    so the docs' label reads the number alone and never the wording of a gap line."""
    shutil.rmtree(three_reps / "004-fig6b-full")
    out = tmp_path / "out"
    reproduce.reproduce("004", "full", three_reps, out, run=False, partial=True)
    env = json.loads((out / "004" / "environment.json").read_text())
    assert env["cells"] == {"fewest": 0, "planned": 3}
    assert any(g.startswith("004-fig6b-full: no results") for g in env["incomplete"])
    assert "| 004 | full, partial | " in reproduce_docs.docs_section(out)


def test_one_thin_cell_is_enough_to_refuse(three_reps: Path, tmp_path: Path) -> None:
    """Every cell but one at 3 runs, that one at 1: the fewest, not the mean, decides."""
    root = three_reps / "004-fig6c-full"
    first = results.load(root).planned[0]
    cell = (first["variant"], json.dumps(first["point"], sort_keys=True))
    plan = results.load(root).planned
    thin = {
        p["run_id"]
        for p in plan
        if (p["variant"], json.dumps(p["point"], sort_keys=True)) == cell and p["repetition"] > 1
    }
    keep(root, lambda run_id, rep: run_id not in thin)
    assert reproduce_gaps.cell_runs(results.load(root)) == (1, 3, 3)
    with pytest.raises(UsageError) as refused:
        reproduce.reproduce("004", "full", three_reps, tmp_path / "o", run=False, min_n=2)
    assert (
        "004-fig6c-full: 2 of 36 planned runs never ran (a cell holds 1-3 complete runs of its 3)"
        in str(refused.value)
    )


def test_failed_and_rig_limited_runs_do_not_count_towards_n(
    three_reps: Path, tmp_path: Path
) -> None:
    """A complete campaign whose cell holds 3 runs, 2 of them failed or rig-limited (no
    number: reports leave them out), stands on n = 1 there: refused at --min-n 2."""
    root = three_reps / "004-fig6c-full"
    runs = pd.read_parquet(root / "runs.parquet")
    first = results.load(root).planned[0]
    cell = [
        p["run_id"]
        for p in results.load(root).planned
        if p["variant"] == first["variant"] and p["point"] == first["point"]
    ]
    runs.loc[runs["run_id"].isin(cell[1:]), "status"] = "failed"
    runs.to_parquet(root / "runs.parquet")
    loaded = results.load(root)
    assert not loaded.missing and reproduce_gaps.cell_runs(loaded) == (1, 3, 3)
    with pytest.raises(UsageError) as refused:
        reproduce.reproduce("004", "full", three_reps, tmp_path / "o", run=False, min_n=2)
    assert "004-fig6c-full: 2 failed or rig-limited (a cell holds 1-3 complete runs of its 3)" in (
        str(refused.value)
    )


def test_a_campaign_without_results_is_refused_at_any_n(three_reps: Path, tmp_path: Path) -> None:
    shutil.rmtree(three_reps / "004-fig7-full")
    with pytest.raises(UsageError, match="004-fig7-full: no results"):
        reproduce.reproduce("004", "full", three_reps, tmp_path / "o", run=False, min_n=1)


def test_the_command_line(
    three_reps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["reproduce", "004", "--profile", "full", "--results", str(three_reps),
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert cli.main([*argv, "--min-n", "3"]) == 2
    assert "fewer than 3 runs" in capsys.readouterr().err
    assert cli.main([*argv, "--min-n", "2"]) == 0
    assert (tmp_path / "out" / "004" / "report.md").is_file()
    with pytest.raises(SystemExit):
        cli.main([*argv, "--min-n", "0"])
    assert "allowed: 1 to 1000" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("environment", "shown"),
    [
        ({}, "full"),
        ({"incomplete": ["x: 9 of 10 planned runs never ran (a cell holds 1 of its 10)"],
          "cells": {"fewest": 1, "planned": 10}}, "full, n ≥ 1 of 10"),
        ({"incomplete": ["x: 10 of 10 planned runs never ran (a cell holds 0-0 of its 10)"],
          "cells": {"fewest": 0, "planned": 10}}, "full, partial"),
        ({"incomplete": ["y: no results (absent)"], "cells": {"fewest": 0, "planned": 5}},
         "full, partial"),
        ({"incomplete": ["x: ... (written before environment.json had cells)"]}, "full, partial"),
    ],
)  # fmt: skip
def test_docs_name_a_reproduction_by_the_n_its_cells_hold(
    environment: dict[str, object], shown: str
) -> None:
    assert reproduce_gaps.label("full", environment) == shown
