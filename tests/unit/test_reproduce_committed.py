"""A committed reproduction judged again from its own files (reports/reproduce_committed.py)
gives back its committed verdicts.json, report.md and environment.json byte for byte, so a
change to the verdicts that was not carried into reports/reproductions/ fails here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reports import reproduce_committed
from reports.reproduce import REPRODUCTIONS

SEEDS = sorted(p.parent.name for p in REPRODUCTIONS.glob("*/verdicts.json"))
JUDGED = ("verdicts.json", "report.md", "environment.json")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_committed_reproduction_is_judged_again_to_the_same_bytes(
    seed: str, tmp_path: Path
) -> None:
    root = tmp_path / seed
    shutil.copytree(REPRODUCTIONS / seed, root)
    assert reproduce_committed.rejudge(root) == root / "report.md"
    for name in JUDGED:
        assert (root / name).read_text() == (REPRODUCTIONS / seed / name).read_text(), name


def test_a_run_the_campaign_no_longer_plans_is_refused(tmp_path: Path) -> None:
    import pandas as pd

    from mprig.errors import UsageError

    root = tmp_path / "004"
    shutil.copytree(REPRODUCTIONS / "004", root)
    metrics = pd.read_parquet(root / "metrics.parquet")
    metrics.loc[0, "run_id"] = "mptcp-rmem_123-r9-00000000"
    metrics.to_parquet(root / "metrics.parquet")
    with pytest.raises(UsageError, match=r"fig4-core.yaml: plans no run like mptcp-rmem_123-r9"):
        reproduce_committed.rejudge(root)
