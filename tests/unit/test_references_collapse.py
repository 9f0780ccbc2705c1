"""A verdict that passes on collapse is a defect (issue 15, "verdicts that cannot fail"):
every paper's full campaigns, with every MPTCP run at 5 % of its configured capacity, give
no throughput row a "reproduced" — except the rows whose paper value is itself such a
collapse, each named here with the reason its floor allows it. Likewise a comparison that
passes when nothing differs: with every run alike, no ratio or gain row and no ordering is
reproduced unless the paper's own value is no effect."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import paper_synth as ps
import pytest
from test_references import CAMPAIGN_FILES, paper_results, shipped

from reports import orderings, refspec, results
from reports import references as refs

RATE_METRICS = ("throughput_bps", "goodput_bps", "iperf3_bps", "link_util")

# Paper 003, scenario 3: "NoPR and Eifel never above 2 Mbit/s (uses the 11b path only)" over
# 11g + 11b paths. The paper's own number is a collapse to the 11b path, so the rows' sanity
# floor is half of the 11b path's rate (0.7 Mbit/s), not half of the MPTCP capacity; 5 % of
# the capacity of both paths (about 0.85 Mbit/s at 10 m) is above it.
PAPER_CLAIMS_A_COLLAPSE = {"003-text-s3-nopr-max", "003-text-s3-eifel-max"}


def rate_rows_reproduced_on_collapse(campaign: str) -> set[str]:
    res = paper_results(campaign, "collapsed")
    ids = [i for i in refspec.select(tuple(res.spec["references"]), shipped()) if i in shipped()]
    return {
        c.id
        for c in refs.check(res, shipped(), ids)
        if shipped()[c.id].ref.metric.startswith(RATE_METRICS) and c.verdict == "reproduced"
    }


@pytest.mark.parametrize("campaign", CAMPAIGN_FILES)
def test_no_rate_row_is_reproduced_by_a_collapse(campaign: str) -> None:
    assert rate_rows_reproduced_on_collapse(campaign) - PAPER_CLAIMS_A_COLLAPSE == set()


def test_the_exceptions_are_real_rows_whose_floor_is_below_the_collapse() -> None:
    """Each exception is a shipped at_most row with a floor under its paper value: the
    list cannot keep an id that a file renamed or a bound that became two-sided."""
    for ref_id in PAPER_CLAIMS_A_COLLAPSE:
        ref = shipped()[ref_id].ref
        assert ref.kind == "at_most" and ref.floor is not None and 0 < ref.floor < ref.value
    assert rate_rows_reproduced_on_collapse("003-scenario3-full") == PAPER_CLAIMS_A_COLLAPSE


def alike(run: ps.Run, rng: np.random.Generator) -> dict[str, float]:
    """Every run alike, whatever its protocol, paths, recovery or coupling: 5 Mbit/s,
    30 % of each path, OOO-R 10 %, OOO-BO 150 KB, each with a 5 % spread."""
    out = ps.healthy(run, rng)
    same = 5e6 * rng.lognormal(0, 0.05)
    for key in out:
        if key.startswith(("throughput_bps", "goodput_bps", "iperf3_bps")):
            out[key] = same
        elif key.startswith("link_util"):
            out[key] = 0.3 * rng.lognormal(0, 0.05)
    out["ooo_ratio"] = 0.1 * rng.lognormal(0, 0.05)
    out["ooo_max_bytes"] = 150_000 * rng.lognormal(0, 0.05)
    return out


@cache
def alike_checks(campaign: str) -> tuple[refs.Check, ...]:
    with tempfile.TemporaryDirectory(prefix=f"alike-{campaign}-") as tmp:  # judged, then gone
        res = results.load(ps.write(Path(tmp) / campaign, campaign, alike, repetitions=5))
        ids = [
            i for i in refspec.select(tuple(res.spec["references"]), shipped()) if i in shipped()
        ]
        return tuple(refs.check(res, shipped(), ids))


@pytest.mark.parametrize("campaign", CAMPAIGN_FILES)
def test_no_comparison_is_reproduced_when_every_run_is_alike(campaign: str) -> None:
    passed = {
        c.id: shipped()[c.id].ref.value
        for c in alike_checks(campaign)
        if shipped()[c.id].ref.relative_to is not None and c.verdict == "reproduced"
    }
    no_effect = {i: v for i, v in passed.items() if v == shipped()[i].ref.null_value}
    assert passed == no_effect


@pytest.mark.parametrize("paper", sorted(orderings.ORDERINGS))
def test_no_ordering_is_reproduced_when_every_run_is_alike(paper: str) -> None:
    checks = [c for name in CAMPAIGN_FILES if name.startswith(paper) for c in alike_checks(name)]
    judged = orderings.judge_all(paper, checks)
    assert judged and all(j.verdict != "reproduced" for j in judged)
    assert all(s.state in ("open", "missing") for j in judged for s in j.steps)
