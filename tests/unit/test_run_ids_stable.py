"""Run ids hash every parameter of a run (mprig/campaign/plan.py), so a field added to the
spec must leave the ids of campaigns that do not use it as they were: otherwise every
results directory and archive made before looks like someone else's campaign, a resumed
campaign redoes every run and `mprig backlog` plans the archived full profiles again. The
committed archives hold ids made by earlier code; each campaign's current plan must name
them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import load_campaign

ROOT = Path(__file__).resolve().parents[2]
ARCHIVES = sorted(p.parent for p in (ROOT / "reports" / "archived-runs").glob("*/campaign.json"))


def test_there_are_archives_to_check() -> None:
    assert len(ARCHIVES) >= 5


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda p: p.name)
def test_every_archived_run_is_still_planned(archive: Path) -> None:
    spec = ROOT / "experiments" / "papers" / f"{archive.name}.yaml"
    planned = {run.run_id for run in plan.expand(load_campaign(spec))}
    archived = {p.parent.name for p in archive.glob("*/run.json")}
    assert archived, archive
    assert sorted(archived - planned)[:3] == [], f"{len(archived - planned)} of {len(archived)}"
