"""`mprig collect` on a bundle made just now: a real 1 s MPTCP download over two
tbf-limited paths (4 and 2 Mbit/s) in namespaces on this kernel (prefix h5c)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
from realbundle import make_bundle

from mprig.cli.main import main


def test_collect_fresh_bundle(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "native" / "r1", prefix=f"h5c{os.getpid() % 1000}")
    assert main(["collect", str(tmp_path), "--quiet"]) == 0
    doc = json.loads((bundle / "metrics.json").read_text())
    row = doc["row"]
    runs = pd.read_parquet(tmp_path / "native" / "runs.parquet")
    assert (list(runs["run_id"]), list(runs["status"]), doc["problems"]) == (
        ["r1"],
        ["complete"],
        [],
    )
    # both paths carried data, each below its configured rate
    assert [p for p in ("wifi", "cell") if 0.3 < row[f"link_util.{p}"] <= 1.05] == ["wifi", "cell"]
    assert row["goodput_bps"] <= row["throughput_bps"] <= 6.3e6
    assert [s["path"] for s in doc["subflows"]] == ["wifi", "cell"]
    kernel = doc["kernel_ofo"]
    assert doc["kernel_ofo_ratio"] == kernel["ooo_skbs"] / kernel["MPTcpExtOFOQueue"]
    assert kernel["ooo_packets"] >= kernel["ooo_skbs"] > 0
    assert kernel["MPTcpExtOFOQueue"] == doc["nstat"]["client"]["MPTcpExtOFOQueue"] > 0
    ts = pd.read_parquet(bundle / "timeseries.parquet")
    assert sorted(ts["source"].unique()) == ["capture", "iperf3", "ss"]
