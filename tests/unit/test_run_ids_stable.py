"""Run ids hash every parameter of a run (mprig/campaign/plan.py), and an archive is only
added to by the campaign whose spec hashes as its campaign.json's (mprig/run/merge.py), so
a field added to the spec must leave both as they were for campaigns that do not use it:
otherwise every results directory and archive made before looks like someone else's
campaign, a resumed campaign redoes every run, `mprig backlog` plans the archived full
profiles again and `mprig run --skip-archived` refuses the archive. The committed archives
were written by earlier code; each campaign's current spec and plan must match them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import load_campaign
from mprig.run import bundle, merge

ROOT = Path(__file__).resolve().parents[2]
ARCHIVES = sorted(p.parent for p in (ROOT / "reports" / "archived-runs").glob("*/campaign.json"))


@functools.cache
def current(archive: Path) -> tuple[Path, Any, list[Any]]:
    """The archive's campaign as this code plans it: (spec file, campaign, plan)."""
    spec = ROOT / "experiments" / "papers" / f"{archive.name}.yaml"
    campaign = load_campaign(spec)
    return spec, campaign, plan.expand(campaign)


def test_there_are_archives_to_check() -> None:
    assert len(ARCHIVES) >= 5


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda p: p.name)
def test_every_archived_run_is_still_planned(archive: Path) -> None:
    planned = {run.run_id for run in current(archive)[2]}
    archived = {p.parent.name for p in archive.glob("*/run.json")}
    assert archived, archive
    assert sorted(archived - planned)[:3] == [], f"{len(archived - planned)} of {len(archived)}"


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda p: p.name)
def test_every_archive_is_still_its_campaigns(archive: Path) -> None:
    """The archive check of the next sitting: this campaign.json against the archive's."""
    spec, campaign, runs = current(archive)
    doc = bundle.campaign_doc(str(spec), campaign, runs)
    merge.check_same_campaign([merge.Source(spec, doc), merge.read_source(archive)])
