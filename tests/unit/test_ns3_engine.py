"""engine: ns3 paths (issue 16 parts 3-4): the spec key, the engine's command line, its
summary line, the real-time verdict and the rig's link type. No root, no ns-3 needed."""

from __future__ import annotations

from typing import Any

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.errors import SpecError
from mprig.rig import layout, netns, ns3link
from mprig.run import commands, run_attempt, run_record
from reports import results

NS3_PATH = """\
name: t
paths:
  - name: wifi
    kind: wifi
    engine: ns3
    distance_m: 30
    rate_mbit: 54
variants:
  - name: mptcp
"""


def spec_error(text: str) -> tuple[int | None, str, str]:
    with pytest.raises(SpecError) as exc:
        parse_campaign(text, "t.yaml")
    e = exc.value
    return e.line, e.field, e.message


def test_engine_defaults_to_netem() -> None:
    c = parse_campaign(NS3_PATH.replace("    engine: ns3\n", ""), "t.yaml")
    assert c.paths[0].engine == "netem"


def test_engine_ns3_on_a_wifi_path_with_distance() -> None:
    assert parse_campaign(NS3_PATH, "t.yaml").paths[0].engine == "ns3"


def test_unknown_engine_is_refused_at_its_line() -> None:
    line, field, message = spec_error(NS3_PATH.replace("engine: ns3", "engine: ns2"))
    assert (line, field) == (5, "paths.wifi.engine")
    assert "'netem'" in message and "'ns3'" in message


def test_engine_ns3_needs_distance() -> None:
    line, field, message = spec_error(NS3_PATH.replace("    distance_m: 30\n", ""))
    assert (line, field) == (5, "paths.wifi.engine")
    assert "distance_m" in message and "engine: netem" in message


def test_engine_ns3_needs_a_wifi_path() -> None:
    text = NS3_PATH.replace("kind: wifi", "kind: cellular").replace("    distance_m: 30\n", "")
    line, field, message = spec_error(text)
    assert (line, field) == (5, "paths.wifi.engine")
    assert "kind: wifi" in message


def test_engine_ns3_refuses_netem_impairments() -> None:
    text = NS3_PATH.replace("rate_mbit: 54\n", "rate_mbit: 54\n    delay_ms: 5\n")
    line, field, message = spec_error(text)
    assert (line, field) == (5, "paths.wifi.engine")
    assert "delay_ms" in message


# -- the engine's command, summary and verdict (mprig/rig/ns3link.py) ------------------------

SUMMARY_LINE = (
    'mprig-engine {"lag_max_ms": 62.0038, "lag_p95_ms": 2.08973, "lag_p50_ms": 0.0988, '
    '"lag_samples": 2919, "sim_s": 2.919, "packets": {"down_in": 6, "down_out": 5, '
    '"up_in": 6, "up_out": 5}, "mac": {"down": {"mpdus": 0, "failed_attempts": 0, '
    '"dropped": 0, "mean_phy_rate_mbit": 1}, "up": {"mpdus": 5, "failed_attempts": 0, '
    '"dropped": 0, "mean_phy_rate_mbit": 54}}}'
)


def ns3_campaign() -> Any:
    text = NS3_PATH.replace(
        "    rate_mbit: 54\n", "    rate_mbit: 54\n    channel_model: paper003\n"
    )
    return parse_campaign(text, "t.yaml")


def test_engine_argv_carries_the_path_and_the_seed() -> None:
    path = ns3_campaign().paths[0]
    link = layout.layout([path])[0]
    argv = ns3link.engine_argv("ns3dev", path, link, 1, seed=7)
    assert argv[:5] == ["ip", "netns", "exec", "mprig-ns3dev-ap", str(ns3link.BINARY)]
    assert argv[5:] == [
        "--standard=11g",
        "--manager=constant",
        "--rate=54",
        "--exponent=2.2",
        "--referenceLoss=46.6777",
        "--distance=30",
        "--seed=57",
        "--clientNetns=/run/netns/mprig-ns3dev-client",
        "--clientTap=wlan0",
        "--routerTap=lan0",
        "--clientMac=02:6d:70:01:01:02",
        "--routerMac=02:6d:70:01:01:01",
    ]


def test_layout_and_link_types_name_the_engine() -> None:
    paths = ns3_campaign().paths
    assert [link.engine for link in layout.layout(paths)] == ["ns3"]
    assert ns3link.link_types(paths) == {"wifi": "ns3"}
    assert ns3link.LINK_TYPE in netns.CLIENT_LINKS


def test_an_ns3_path_gets_no_netem() -> None:
    c = ns3_campaign()
    run = plan.expand(c)[0]
    cmds = commands.build(run, layout.layout(c.paths))
    assert [argv[:3] for _, argv in cmds.setup if argv[0] == "tc"] == []
    assert cmds.teardown == []


def test_parse_summary_reads_the_last_line() -> None:
    doc = ns3link.parse_summary("mprig-engine ready at 0.12 s\n" + SUMMARY_LINE + "\n")
    assert (doc["lag_max_ms"], doc["lag_p95_ms"], doc["packets"]["down_out"]) == (
        62.0038,
        2.08973,
        5,
    )


def test_parse_summary_refuses_a_log_without_one() -> None:
    with pytest.raises(ValueError, match="no summary"):
        ns3link.parse_summary("mprig-engine ready at 0.12 s\nKilled\n")


def summary(p95: float, peak: float) -> dict[str, Any]:
    return {"lag_max_ms": peak, "lag_p95_ms": p95, "packets": {"down_in": 10, "up_in": 4}}


@pytest.mark.parametrize(
    ("p95", "peak", "realtime"),
    [(0.5, 20.0, True), (10.0, 200.0, True), (10.5, 20.0, False), (1.0, 250.0, False)],
)
def test_verdict_takes_the_worst_path(p95: float, peak: float, realtime: bool) -> None:
    v = ns3link.verdict({"wifi": summary(0.1, 1.0), "wifi2": summary(p95, peak)})
    assert (v["kind"], v["lag_p95_ms"], v["lag_max_ms"], v["packets"], v["realtime"]) == (
        "ns3",
        p95,
        peak,
        28,
        realtime,
    )


def test_a_lagging_engine_flags_the_run() -> None:
    out = run_attempt.Outcome(engine=ns3link.verdict({"wifi": summary(30.0, 400.0)}))
    assert run_record.run_flags(out) == ["not_realtime"]
    assert run_record.run_flags(run_attempt.Outcome(engine={})) == []


def test_a_not_realtime_run_is_left_out_like_a_rig_limited_one() -> None:
    record = {"flags": ["not_realtime"], "engine": ns3link.verdict({"w": summary(30.0, 400.0)})}
    assert results.rig_limited_reason(record) == (
        "rig-limited: not real-time: ns-3 lag p95 30 ms, max 400 ms (limits 10 ms, 200 ms)"
    )
