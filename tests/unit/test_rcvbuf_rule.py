"""Paper 004's receive-buffer rule as a measured verdict (issue 15's done-when): with a
buffer of at least 2 x sum(x) x RTT_max (375 KB for 3G 2 Mbit/s 150 ms + Wi-Fi 8 Mbit/s
20 ms), MPTCP fills both pipes. The three 004-rcvbuf-* rows that compute the rule from the
configured paths are configuration checks; 004-rcvbuf-fills-both measures it."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import paper_synth as ps
import pytest
import yaml
from papers_digest import section
from test_references import paper_results

from reports import references as refs
from reports import refmatch, refspec

ROW = "004-rcvbuf-fills-both"
COMMITTED = Path(__file__).resolve().parents[2] / "reports" / "reproductions" / "004"


@cache
def entry() -> refspec.Entry:
    return refspec.load_all()[ROW]


def judged(mbit: list[float]) -> refs.Check:
    """The check of per-repetition values already in the row's unit (Mbit/s)."""
    values = np.array(mbit)
    return refs.judge(entry(), refs.Sample(values, pd.DataFrame()), None)


def test_the_row_is_measured_not_computed_from_the_configuration() -> None:
    ref = entry().ref
    assert ref.metric == "throughput_bps" and ref.metric not in refmatch.CONFIGURED
    assert (ref.kind, ref.unit, ref.scale) == ("at_least", "Mbit/s", pytest.approx(1e-6))


def test_both_pipes_are_the_digests_two_rates() -> None:
    m = re.search(
        r"3G (\d+) Mbit/s 150 ms \+ Wi-Fi (\d+) Mbit/s 20 ms needs 375 KB", section("004")
    )
    assert m is not None
    assert entry().ref.value == float(m[1]) + float(m[2])


@pytest.mark.parametrize("campaign", ["004-fig4-core", "004-fig4-full"])
def test_it_meets_the_mptcp_runs_at_the_first_buffer_at_or_above_the_rule(campaign: str) -> None:
    """400 KB, the first swept buffer at or above the rule's 375 KB: only MPTCP's runs there
    (not 370 KB, not TCP over either path)."""
    res = paper_results(campaign)
    assert ROW in refspec.select(tuple(res.spec["references"]), refspec.load_all())
    facts = refmatch.run_facts(res)
    met = refmatch.match(facts, entry().ref.conditions)
    assert set(met["variant"]) == {"mptcp"}
    rmem = next(c for c in met.columns if c.endswith("rmem"))
    assert set(met[rmem]) == {400000}
    assert len(met) == 5


def test_the_other_004_campaigns_never_select_it() -> None:
    """Fig. 6(a)'s 3G path is 50 kbit/s: both pipes there are not 10 Mbit/s."""
    every = refspec.load_all()
    chosen = {
        path.stem: refspec.select(yaml.safe_load(path.read_text())["references"], every)
        for path in sorted(ps.PAPERS.glob("004-*.yaml"))
    }
    assert {name for name, ids in chosen.items() if ROW in ids} == {
        "004-fig4-quick",
        "004-fig4-core",
        "004-fig4-full",
    }


@pytest.mark.parametrize(
    ("mbit", "verdict"),
    [
        ([9.5, 9.55, 9.6, 9.5, 9.58], "reproduced"),  # both pipes full, at TCP's 95.5 %
        ([5.0, 5.1, 5.2, 4.9, 5.05], "contradicted"),  # measured: upstream MPTCP at 400 KB
        ([0.4, 0.5, 0.45, 0.5, 0.42], "contradicted"),  # a collapse cannot pass
        ([12.0, 12.1, 11.9, 12.2, 12.0], "contradicted"),  # above both pipes: a broken rig
        ([6.0, 9.9, 8.0], "inconclusive"),  # a CI reaching into the window from below
    ],
)
def test_verdict_from_the_confidence_interval(mbit: list[float], verdict: str) -> None:
    assert judged(mbit).verdict == verdict


def test_the_committed_full_reproduction_judges_it_contradicted() -> None:
    """reports/reproductions/004 (full profile since 2026-11-29, core before; n = 5): MPTCP
    at 400 KB well below both pipes."""
    verdicts = json.loads((COMMITTED / "verdicts.json").read_text())
    (row,) = [c for c in verdicts["checks"] if c["id"] == ROW]
    assert row["campaign"] == "004-fig4-full"
    assert (row["verdict"], row["n"]) == ("contradicted", 5)
    assert row["high"] < row["window"][0]
