"""The block workload (seed 004 Fig. 7): its command lines and the receiver log's summary."""

from __future__ import annotations

import json

import pytest

from mprig import traffic


def line(seq: int, sent_ms: float, recv_ms: float) -> str:
    return json.dumps({"seq": seq, "sent_ns": int(sent_ms * 1e6), "recv_ns": int(recv_ms * 1e6)})


def test_parse_blocks_gives_nearest_rank_percentiles_and_gaps() -> None:
    # 100 blocks with delays 1..100 ms, block 7 never arrived
    text = "\n".join(line(i, 1000 * i, 1000 * i + i + 1) for i in range(101) if i != 7)
    got = traffic.parse_blocks(text + "\n")
    assert got == traffic.BlockDelays(
        n=100, missing=1, p50_ms=51.0, p95_ms=96.0, p99_ms=100.0, max_ms=101.0
    )


def test_parse_blocks_refuses_an_empty_log() -> None:
    with pytest.raises(ValueError, match="no block"):
        traffic.parse_blocks("")


def test_blocks_argv_both_ends() -> None:
    recv = traffic.blocks_argv("listen", "10.0.0.2", block_bytes=8192, interval_ms=0,
                               duration_s=5, mptcp=True, send=False,
                               out="blocks.jsonl")  # fmt: skip
    send = traffic.blocks_argv("connect", "10.0.0.2", block_bytes=8192, interval_ms=10,
                               duration_s=5, mptcp=True, send=True, out="s.json",
                               bind="10.0.1.1")  # fmt: skip
    assert recv[3:] == ["listen", "10.0.0.2", "5203", "8192", "0", "5", "1", "recv",
                        "blocks.jsonl"]  # fmt: skip
    assert send[3:] == ["connect", "10.0.0.2", "5203", "8192", "10", "5", "1", "send",
                        "s.json", "10.0.1.1"]  # fmt: skip
