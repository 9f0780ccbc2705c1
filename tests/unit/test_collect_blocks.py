"""`mprig collect` on a blocks run: the real iperf3 bundle of test_collect with its traffic
made `tool: blocks` and a committed receiver log (tests/captures/test_collect/blocks:
the first 40 blocks of a 3 s MPTCP run over tbf-shaped 8 + 2 Mbit/s paths made by
tests/integration/test_run_blocks_native.py; the sender's count says 42, so the last two
never arrived)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from collectors.collect import Options, collect_campaign
from mprig.run import bundle as bundles

CAPTURES = Path(__file__).parents[1] / "captures" / "test_collect"
# nearest-rank quantiles of the 40 delays in blocks.jsonl (ns), worked by hand from the file
P50, P95, P99_MAX = 90_807_857, 181_615_452, 197_491_594


def s(ns: int) -> float:
    """Seconds the way the collector gets them (parse_blocks works in ms)."""
    return ns / 1e6 / 1e3


def blocks_bundle(root: Path) -> Path:
    run = root / "blk" / "b1"
    shutil.copytree(CAPTURES / "mptcp_download", run)
    for name in ("iperf3-client.json", "iperf3-server.json"):
        (run / name).unlink()
    for name in ("blocks.jsonl", "blocks-sent.json"):
        shutil.copy(CAPTURES / "blocks" / name, run / name)
    record = json.loads((run / "run.json").read_text())
    record |= {"run_id": "b1", "campaign": "blk"}
    record["traffic"] |= {"tool": "blocks", "duration_s": 3.0, "block_bytes": 8192,
                          "interval_ms": 0}  # fmt: skip
    record["artifacts"] = {p.name: bundles.sha256_file(p) for p in run.iterdir()
                           if p.name != "run.json"}  # fmt: skip
    (run / "run.json").write_text(json.dumps(record))
    return run.parent


def test_the_per_block_log_becomes_delay_percentiles_and_missing_blocks(tmp_path: Path) -> None:
    outcome = collect_campaign(blocks_bundle(tmp_path), Options())
    (run,) = outcome.runs
    got = {k: run.row[k] for k in ("block_delay_p50_s", "block_delay_p95_s",
                                   "block_delay_p99_s", "block_delay_max_s",
                                   "blocks_missing", "iperf3_bps")}  # fmt: skip
    assert got == {
        "block_delay_p50_s": s(P50),
        "block_delay_p95_s": s(P95),
        "block_delay_p99_s": s(P99_MAX),
        "block_delay_max_s": s(P99_MAX),
        "blocks_missing": 2,
        "iperf3_bps": None,
    }
    assert outcome.problems == []
    doc = json.loads((tmp_path / "blk" / "b1" / "metrics.json").read_text())
    assert doc["blocks"] == {"received": 40, "sent": 42, "missing": 2}
    frame = pd.read_parquet(tmp_path / "blk" / "runs.parquet")
    assert (frame["blocks_missing"].dtype, frame["block_delay_p50_s"].iloc[0]) == (
        pd.Int64Dtype(),
        s(P50),
    )
    series = pd.read_parquet(tmp_path / "blk" / "b1" / "timeseries.parquet")
    delays = series[series["source"] == "blocks"]["value"]
    assert (len(delays), delays.max()) == (40, P99_MAX / 1e9)


def test_a_damaged_log_nulls_only_the_block_metrics(tmp_path: Path) -> None:
    camp = blocks_bundle(tmp_path)
    (camp / "b1" / "blocks.jsonl").write_text('{"seq": 0}\n')
    record = json.loads((camp / "b1" / "run.json").read_text())
    record["artifacts"]["blocks.jsonl"] = bundles.sha256_file(camp / "b1" / "blocks.jsonl")
    (camp / "b1" / "run.json").write_text(json.dumps(record))
    outcome = collect_campaign(camp, Options())
    (run,) = outcome.runs
    assert [run.row[k] for k in ("block_delay_p50_s", "blocks_missing")] == [None, None]
    assert run.row["goodput_bps"] is not None
    assert outcome.problems == [
        "b1/blocks.jsonl: not the receiver's per-block log (a line has no 'recv_ns')"
    ]
