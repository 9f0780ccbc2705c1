"""Issue 19 part 1 (report side): the instrument behind every number is stated (a glossary
with source and payload/wire bytes), TCP and MPTCP throughput from the same capture with
ss and iperf3 beside it, link utilisation over 100 % explained or flagged, and time-series
axes that start at the run's start."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import report_synth as rs

from reports import figures_timeseries, instruments, report, results

AXIS = "param.paths.wifi.distance_m"


def runs() -> results.Results:
    rows = []
    for variant, protocol, thr, ss, wire in (
        ("tcp", "tcp", (19.0e6, 19.2e6, 19.4e6), 20.9e6, 19.9e6),
        ("mptcp", "mptcp", (18.0e6, 18.0e6, 18.0e6), 18.1e6, 18.8e6),
    ):
        for rep, value in enumerate(thr, start=1):
            rows.append(
                {
                    "run_id": f"{variant}-{rep}",
                    "variant": variant,
                    "protocol": protocol,
                    "status": "complete",
                    "repetition": rep,
                    AXIS: 50.0,
                    "throughput_bps": value,
                    "ss_acked_bps": ss,
                    "iperf3_bps": value * 0.99,
                    "throughput_bps.wifi": value,
                    "wire_bps.wifi": wire,
                    "link_util.wifi": value / 20e6,
                }
            )
    # one run over the configured rate: payload 20.87 Mbit/s, wire 21.6, on 20 Mbit/s
    rows[2] |= {"throughput_bps.wifi": 20.87e6, "wire_bps.wifi": 21.6e6, "link_util.wifi": 1.0435}
    # one run whose wire bytes are within the capture's timing of the rate
    rows[3] |= {"wire_bps.wifi": 20.05e6}
    frame = results._derive(pd.DataFrame(rows))
    return results.Results(Path("/r"), "i", {"name": "i"}, (), frame)


def test_glossary_names_source_and_bytes_of_every_metric() -> None:
    entries = {e.term: e for e in instruments.GLOSSARY}
    for term in (
        "OOO-BO",
        "OOO-R",
        "LU",
        "Throughput",
        "Goodput",
        "Wire rate",
        "ss acked",
        "iperf3",
        "OOO arrivals",
        "Retransmitted",
        "Reinjected",
        "Rcv buffer K",
    ):
        assert entries[term].source and entries[term].counts and entries[term].definition
    assert (entries["LU"].source, entries["LU"].counts) == (
        "receiver capture (plain TCP and MPTCP alike)",
        "payload bytes",
    )
    assert entries["Wire rate"].counts == "wire bytes: IP length + 14-byte Ethernet header"
    md = instruments.glossary_markdown()
    assert md.startswith("## Glossary\n")
    assert "docs/metrics.md" in md


def test_one_instrument_with_the_cross_checks_beside_it() -> None:
    t = instruments.instrument_table(runs())
    assert list(t.display.columns) == [
        "variant",
        "wifi.distance_m",
        "capture (Mbit/s)",
        "ss acked (Mbit/s)",
        "ss / capture",
        "iperf3 (Mbit/s)",
        "iperf3 / capture",
        "n",
    ]
    nbsp = "\u00a0"
    assert t.display.values.tolist() == [
        ["mptcp", "50", f"18.00{nbsp}±{nbsp}0.00", "18.10", "1.006", "17.82", "0.990", "3"],
        ["tcp", "50", f"19.20{nbsp}±{nbsp}0.50", "20.90", "1.089", "19.01", "0.990", "3"],
    ]
    assert "receiver capture" in t.title


def test_link_utilisation_over_the_rate_is_explained_or_flagged() -> None:
    checks = instruments.link_checks(runs())
    assert [(c.run_id, c.path, c.verdict) for c in checks] == [
        ("mptcp-1", "wifi", "explained"),
        ("tcp-3", "wifi", "flagged"),
    ]
    flagged = checks[1]
    assert flagged.detail == (
        "payload 20.87 Mbit/s (LU 104.4 %), wire 21.60 Mbit/s on a 20.00 Mbit/s path: "
        "8.0 % more than configured on the wire: the link let more through than its rate "
        "(a tbf or netem burst, or the rate is not applied in this direction); see the "
        "bundle's tc -s qdisc snapshots"
    )
    assert checks[0].detail == (
        "payload 18.00 Mbit/s (LU 90.0 %), wire 20.05 Mbit/s on a 20.00 Mbit/s path: "
        "within 0.5 % of the rate: the capture's first-to-last window counts N segments over "
        "N - 1 gaps"
    )


def test_report_markdown_has_glossary_instruments_and_link_checks(tmp_path: Path) -> None:
    rep = report.build(runs(), [], [])
    md = report.render_markdown(rep)
    assert "## Glossary" in md and "### Throughput by instrument" in md
    assert "## Link utilisation checks" in md and "| tcp-3 | wifi | flagged |" in md
    html = report.render_html(rep)
    assert 'id="glossary"' in html and 'id="link-checks"' in html


def test_time_axes_start_at_the_run_start(tmp_path: Path) -> None:
    late = {
        "cwnd": {"wifi": pd.DataFrame({"t_s": [8.7, 9.0, 10.7], "value": [1.0, 2.0, 3.0]})},
        "ooo_bytes_max": {"": pd.DataFrame({"t_s": [0.2, 5.1], "value": [1.0, 2.0]})},
    }
    assert figures_timeseries.time_limits(late) == (0.0, pytest.approx(10.7))
    res = results.load(rs.write(tmp_path / "c", rs.Synth(repetitions=2)))
    assert figures_timeseries.timeseries_figures(res, tmp_path / "f")
