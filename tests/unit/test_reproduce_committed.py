"""A committed reproduction judged again from its own files (reports/reproduce_committed.py)
gives back its committed verdicts.json, report.md and environment.json byte for byte, so a
change to the verdicts that was not carried into reports/reproductions/ fails here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reports import reproduce_committed
from reports.paperplans import REPRODUCTIONS

PAPERS = sorted(p.parent.name for p in REPRODUCTIONS.glob("*/verdicts.json"))
JUDGED = ("verdicts.json", "report.md", "environment.json")


@pytest.mark.parametrize("paper", PAPERS)
def test_a_committed_reproduction_is_judged_again_to_the_same_bytes(
    paper: str, tmp_path: Path
) -> None:
    root = tmp_path / paper
    shutil.copytree(REPRODUCTIONS / paper, root)
    assert reproduce_committed.rejudge(root) == root / "report.md"
    for name in JUDGED:
        assert (root / name).read_text() == (REPRODUCTIONS / paper / name).read_text(), name


def test_a_reproduction_that_names_its_paper_seed_is_judged_again_as_paper(
    tmp_path: Path,
) -> None:
    """Reproductions committed before issue 20 part 3 name their paper "seed" in
    verdicts.json and environment.json; judged again, they say "paper" as 004 now does."""
    import json

    root = tmp_path / "004"
    shutil.copytree(REPRODUCTIONS / "004", root)
    for name in ("verdicts.json", "environment.json"):
        doc = json.loads((root / name).read_text())
        old = {("seed" if k == "paper" else k): v for k, v in doc.items()}
        (root / name).write_text(json.dumps(old))
    reproduce_committed.rejudge(root)
    for name in JUDGED:
        assert (root / name).read_text() == (REPRODUCTIONS / "004" / name).read_text(), name


def test_a_run_the_campaign_no_longer_plans_is_refused(tmp_path: Path) -> None:
    import pandas as pd

    from mprig.errors import UsageError

    root = tmp_path / "004"
    shutil.copytree(REPRODUCTIONS / "004", root)
    metrics = pd.read_parquet(root / "metrics.parquet")
    metrics.loc[0, "run_id"] = "mptcp-rmem_123-r9-00000000"
    metrics.to_parquet(root / "metrics.parquet")
    # 004's committed reproduction is the full profile since 2026-11-29 (core before)
    with pytest.raises(UsageError, match=r"fig4-full.yaml: plans no run like mptcp-rmem_123-r9"):
        reproduce_committed.rejudge(root)


def test_a_results_directory_left_here_does_not_change_a_complete_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned runs are read back from the results directory's campaign.json only for a
    campaign whose report.md counted runs it lacked (000 at n = 5 of 30): a complete
    reproduction judged again beside a results/ that plans more stays as committed."""
    import json

    root = tmp_path / "001"
    shutil.copytree(REPRODUCTIONS / "001", root)
    left = tmp_path / "results" / "001-cwa-full"
    left.mkdir(parents=True)
    extra = {"run_id": "cwa-x-r99-00000000", "variant": "cwa", "repetition": 99, "point": {}}
    (left / "campaign.json").write_text(json.dumps({"plan": [extra]}))
    monkeypatch.chdir(tmp_path)  # the report names results/001-cwa-full: this one
    reproduce_committed.rejudge(root)
    for name in JUDGED:
        assert (root / name).read_text() == (REPRODUCTIONS / "001" / name).read_text(), name
