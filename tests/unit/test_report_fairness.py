"""Jain's index and the flows' shares in the report (campaigns with cross traffic or a shared
bottleneck): the summary table per variant, the runs table and the terminal summary show
them where runs.parquet has them, and nothing where no run has competing flows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports import results
from reports import tables as tb


def with_cross() -> results.Results:
    """Two variants, three repetitions each: an MPTCP connection beside one TCP flow on the
    cellular path (cell.1), exact numbers; a third variant without competing flows."""
    rows = []
    for variant, shares in (("lia", (0.5, 0.5, 0.5)), ("cubic", (0.6, 0.7, 0.8))):
        for rep, main in enumerate(shares, start=1):
            rows.append(
                {
                    "run_id": f"{variant}-{rep}",
                    "variant": variant,
                    "status": "complete",
                    "repetition": rep,
                    "throughput_bps": 10e6 * main,
                    "jain_index": ((main + (1 - main)) ** 2) / (2 * (main**2 + (1 - main) ** 2)),
                    "main_share": main,
                    "cross_bps.cell.1": 10e6 * (1 - main),
                    "cross_share.cell.1": 1 - main,
                }
            )
    rows.append({"run_id": "alone-1", "variant": "alone", "status": "complete",
                 "repetition": 1, "throughput_bps": 10e6})  # fmt: skip
    return results.Results(Path("/r"), "x", {"name": "x"}, (), results._derive(pd.DataFrame(rows)))


def test_the_summary_table_shows_jains_index_and_each_flows_share() -> None:
    display = tb.summary_table(with_cross()).display
    cols = ["variant", "Jain's index", "Main share (%)", "Share cell.1 (%)", "n"]
    got = display[cols].replace({tb.NBSP: " "}, regex=True).to_dict("records")
    assert got == [
        {"variant": "alone", "Jain's index": "–", "Main share (%)": "–",
         "Share cell.1 (%)": "–", "n": "1"},
        {"variant": "cubic", "Jain's index": "0.853 ± 0.282", "Main share (%)": "70.0 ± 24.8",
         "Share cell.1 (%)": "30.0 ± 24.8", "n": "3"},
        {"variant": "lia", "Jain's index": "1.000 ± 0.000", "Main share (%)": "50.0 ± 0.0",
         "Share cell.1 (%)": "50.0 ± 0.0", "n": "3"},
    ]  # fmt: skip


def test_the_runs_table_and_the_terminal_show_jains_index() -> None:
    res = with_cross()
    runs = tb.run_table(res).display
    assert list(runs.loc[runs["run"] == "cubic-3", ["Jain's index", "Main share (%)"]].iloc[0]) == [
        "0.735", "80.0"]  # fmt: skip
    lines = tb.terminal_summary(res)
    assert lines[1] == (
        "  cubic: Throughput (Mbit/s) 7.00 ± 2.48; Jain's index 0.853 ± 0.282;"
        " Main share (%) 70.0 ± 24.8; n 3"
    )


def test_no_competing_flow_no_fairness_column() -> None:
    res = with_cross()
    alone = results.Results(res.root, "y", {}, (), res.runs[res.runs["variant"] == "alone"]
                            .dropna(axis=1, how="all"))  # fmt: skip
    assert [c for c in tb.summary_table(alone).display.columns] == [
        "variant",
        "Throughput (Mbit/s)",
        "n",
    ]
    assert "Jain's index" not in tb.run_table(alone).display.columns
