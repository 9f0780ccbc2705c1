"""A verdict that passes on collapse is a defect (issue 15, "verdicts that cannot fail"):
every paper's full campaigns, with every MPTCP run at 5 % of its configured capacity, give
no throughput row a "reproduced" — except the rows whose paper value is itself such a
collapse, each named here with the reason its floor allows it."""

from __future__ import annotations

import pytest
from test_references import CAMPAIGN_FILES, paper_results, shipped

from reports import references as refs
from reports import refspec

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
