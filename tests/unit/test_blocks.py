"""The block workload (paper 004 Fig. 7): its command lines and the receiver log's summary."""

from __future__ import annotations

import json

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.errors import SpecError
from mprig.rig.layout import layout
from mprig.run import commands, traffic


def line(seq: int, sent_ms: float, recv_ms: float) -> str:
    return json.dumps({"seq": seq, "sent_ns": int(sent_ms * 1e6), "recv_ns": int(recv_ms * 1e6)})


def test_parse_blocks_gives_nearest_rank_percentiles_and_gaps() -> None:
    # 100 blocks with delays 1..100 ms, block 7 never arrived
    text = "\n".join(line(i, 1000 * i, 1000 * i + i + 1) for i in range(101) if i != 7)
    got = traffic.parse_blocks(text + "\n")
    assert got == traffic.BlockDelays(
        n=100, missing=1, p50_ms=51.0, p95_ms=96.0, p99_ms=100.0, max_ms=101.0, span_s=100.101
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


BLOCKS_YAML = """\
name: blk
paths:
  - {name: wifi, kind: wifi, rate_mbit: 8, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 2, delay_ms: 75}
variants:
  - {name: mptcp, protocol: mptcp, rmem: 200000}
traffic: {tool: blocks, block_bytes: 8192, interval_ms: 0, duration_s: 5}
"""


def blocks_run(yaml_text: str = BLOCKS_YAML) -> plan.Run:
    (run,) = plan.expand(parse_campaign(yaml_text, "blk.yaml"))
    return run


def test_a_blocks_spec_plans_the_server_sending_and_the_client_logging() -> None:
    run = blocks_run()
    cmds = commands.for_run(run, layout(run.paths), server_addr="10.0.0.1", rig="r")
    script = ["python3", "-c", traffic.BLOCKS_SCRIPT]
    ends = [(h, argv[3:]) for h, argv in cmds if argv[:3] == script]
    d = f"/tmp/mprig-r/{run.run_id}"
    assert ends == [
        ("server", ["listen", "10.0.0.1", "5203", "8192", "0", "5", "1", "send",
                    f"{d}/server/blocks-sent.json"]),
        ("client", ["connect", "10.0.0.1", "5203", "8192", "0", "5", "1", "recv",
                    f"{d}/client/blocks.jsonl", "10.1.1.2"]),
    ]  # fmt: skip
    assert traffic.timeout_s(run.traffic) == 5 + traffic.MARGIN_S


def test_an_upload_makes_the_server_the_receiver() -> None:
    run = blocks_run(BLOCKS_YAML.replace("duration_s: 5", "duration_s: 5, direction: upload"))
    c = commands.build(run, layout(run.paths), server_addr="10.0.0.1", rig="r")
    assert (c.server[1][10:], c.client[1][10:]) == (
        ["recv", f"/tmp/mprig-r/{run.run_id}/server/blocks.jsonl"],
        ["send", f"/tmp/mprig-r/{run.run_id}/client/blocks-sent.json", "10.1.1.2"],
    )


def test_blocks_defaults_apply_to_blocks_only_and_keep_other_run_ids() -> None:
    run = blocks_run(BLOCKS_YAML.replace("block_bytes: 8192, interval_ms: 0, ", ""))
    assert (run.traffic.block_bytes, run.traffic.interval_ms) == (8192, 0)
    iperf = parse_campaign(
        BLOCKS_YAML.replace("tool: blocks, block_bytes: 8192, interval_ms: 0, ", "")
    )
    assert (iperf.traffic.block_bytes, iperf.traffic.interval_ms) == (None, None)
    assert "block_bytes" not in plan._canonical(iperf, {})["traffic"]


@pytest.mark.parametrize(
    ("traffic_yaml", "messages"),
    [
        ("{tool: blocks, block_bytes: 8}", ["traffic.block_bytes: must be greater than or equal"
                                            " to 16, got 8 (allowed: >= 16 and <= 1e+06: 16 bytes"
                                            " carry the block's number and send time"]),
        ("{tool: blocks, interval_ms: -1}", ["traffic.interval_ms: must be greater than or equal"
                                             " to 0, got -1"]),
        ("{tool: iperf3, interval_ms: 10}", ["traffic.interval_ms: only tool blocks writes blocks"
                                             " (tool is iperf3)"]),
        ("{tool: blocks, omit_s: 1, bytes: 9}", [
            "traffic.omit_s: is iperf3's warm-up; tool blocks has none",
            "traffic.bytes: is bulk's size; tool blocks writes for duration_s"]),
    ],
)  # fmt: skip
def test_blocks_fields_are_bounded_with_reasons(traffic_yaml: str, messages: list[str]) -> None:
    text = BLOCKS_YAML.replace(BLOCKS_YAML.splitlines()[-1], f"traffic: {traffic_yaml}")
    with pytest.raises(SpecError) as e:
        parse_campaign(text, "blk.yaml")
    for m in messages:
        assert f"blk.yaml:7: {m}" in str(e.value)
