"""Issue 19 parts 1 and 3: a plain TCP run is measured from the receiver's capture like an
MPTCP one (ss and iperf3 kept beside it as cross-checks), wire bytes next to payload bytes
per path, and the `ooo_arrivals` column docs/metrics.md describes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collectors.collect import Options, collect_campaign, runs_frame
from mprig.run import bundle as bundles

CAPTURES = Path(__file__).parents[1] / "captures" / "test_collect"
FIXTURE = CAPTURES / "mptcp_download"
# tests/captures/test_collect/make_tcp_download.py: 100 segments of 1448 B 6.008 ms apart,
# then one retransmission; 40 bytes of IP and TCP headers, 14 of Ethernet on the link.
SEG, SEGMENTS, DURATION = 1448, 101, 100 * 0.006008


def tcp_run(camp: Path) -> Path:
    run = camp / "tcp"
    shutil.copytree(FIXTURE, run)
    shutil.copy(CAPTURES / "tcp_download.pcap", run / "client.pcap")
    record = json.loads((run / "run.json").read_text())
    record["variant"] |= {"name": "tcp_wifi", "protocol": "tcp", "path": "wifi"}
    record["artifacts"] = {
        name: bundles.sha256_file(run / name)
        for name in record["artifacts"]
        if (run / name).is_file()
    }
    (run / "run.json").write_text(json.dumps(record))
    return run


def test_plain_tcp_throughput_comes_from_the_capture(tmp_path: Path) -> None:
    run = tcp_run(tmp_path / "fx")
    outcome = collect_campaign(tmp_path / "fx", Options())
    doc = json.loads((run / "metrics.json").read_text())
    row = outcome.runs[0].row
    payload = SEGMENTS * SEG * 8 / DURATION
    wire = SEGMENTS * (SEG + 40 + 14) * 8 / DURATION
    assert (outcome.problems, doc["path_throughput_source"], doc["capture_warnings"]) == (
        [], "capture", []
    )  # fmt: skip
    assert (row["throughput_bps"], row["throughput_bps.wifi"], row["wire_bps.wifi"]) == (
        pytest.approx(payload), pytest.approx(payload), pytest.approx(wire)
    )  # fmt: skip
    assert (row["goodput_bps"], row["retransmitted_packets"], row["link_util.wifi"]) == (
        pytest.approx((SEGMENTS - 1) * SEG * 8 / DURATION), 1, pytest.approx(payload / 2e6)
    )  # fmt: skip
    assert (row["throughput_bps.cell"], row["ooo_ratio"], row["ooo_arrivals"]) == (None, None, None)
    acked = sum(p["acked_bps"] or 0 for p in doc["ss_paths"].values())
    assert row["ss_acked_bps"] == pytest.approx(acked)  # the cross-check, kept beside it


def test_mptcp_rows_carry_ooo_arrivals_wire_bytes_and_the_ss_cross_check(tmp_path: Path) -> None:
    camp = tmp_path / "fx"
    shutil.copytree(FIXTURE, camp / "mptcp")
    outcome = collect_campaign(camp, Options())
    doc = json.loads((camp / "mptcp" / "metrics.json").read_text())
    row = outcome.runs[0].row
    subflows = {p: [s for s in doc["subflows"] if s["path"] == p] for p in ("wifi", "cell")}
    wire = {
        p: sum(s["ip_bytes"] + 14 * s["packets"] for s in subs)
        * 8
        / doc["connection"]["duration_s"]
        for p, subs in subflows.items()
    }
    assert (row["ooo_arrivals"], row["wire_bps.wifi"], row["wire_bps.cell"]) == (
        doc["connection"]["ooo_arrivals"], pytest.approx(wire["wifi"]), pytest.approx(wire["cell"])
    )  # fmt: skip
    assert row["ooo_arrivals"] > 0 and row["wire_bps.wifi"] > row["throughput_bps.wifi"]
    columns = list(runs_frame([row]).columns)
    assert columns.index("ooo_arrivals") == columns.index("ooo_max_bytes") + 2
    assert "ss_acked_bps" in columns and "wire_bps.wifi" in columns


def test_plain_tcp_has_a_capture_throughput_series_like_mptcp(tmp_path: Path) -> None:
    import pandas as pd

    run = tcp_run(tmp_path / "fx")
    collect_campaign(tmp_path / "fx", Options(bin_s=0.1))
    ts = pd.read_parquet(run / "timeseries.parquet")
    cap = ts[(ts["source"] == "capture") & (ts["metric"] == "throughput_bps")]
    total = cap[cap["path"].isna()]
    wifi = cap[cap["path"] == "wifi"]
    # 101 segments of 1448 B over 0.6008 s in 0.1 s bins: 7 bins, the last with the
    # retransmission; every byte once in the total and once on the wifi path
    assert (len(total), len(wifi)) == (7, 7)
    assert total["value"].sum() * 0.1 / 8 == pytest.approx(SEGMENTS * SEG)
    assert wifi["value"].tolist() == total["value"].tolist()
