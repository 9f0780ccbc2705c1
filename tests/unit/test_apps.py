"""Application workloads (traffic tools requests and cbr): spec keys and their errors, the
seeded response sizes, the command lines, and the summaries of the agents' logs."""

from __future__ import annotations

import json
import statistics

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.errors import SpecError
from mprig.rig.layout import layout
from mprig.run import apps, commands, traffic
from mprig.run.apps_agent import response_sizes

HEAD = """\
name: app
paths:
  - {name: wifi, kind: wifi, rate_mbit: 8, delay_ms: 10}
variants:
  - {name: mptcp, protocol: mptcp}
"""
REQUESTS = HEAD + (
    "traffic: {tool: requests, duration_s: 5,"
    " requests: {count: 20, response: {dist: fixed, bytes: 1000}}}\n"
)
CBR = HEAD + "traffic: {tool: cbr, duration_s: 4, cbr: {rate_mbit: 2, fps: 50, deadline_ms: 80}}\n"


def only_run(text: str) -> plan.Run:
    (run,) = plan.expand(parse_campaign(text, "app.yaml"))
    return run


def errors(traffic_yaml: str) -> str:
    with pytest.raises(SpecError) as e:
        parse_campaign(HEAD + f"traffic: {traffic_yaml}\n", "app.yaml")
    return str(e.value)


def req(inner: str, response: str = "{dist: fixed, bytes: 1000}") -> str:
    return f"{{tool: requests, requests: {{response: {response}{', ' if inner else ''}{inner}}}}}"


def cbr(inner: str) -> str:
    return f"{{tool: cbr, cbr: {{{inner}}}}}"


# every new key's bad value, and every rule between keys, with its file:line and message
@pytest.mark.parametrize(
    ("traffic_yaml", "message"),
    [
        (req("count: 0"), "traffic.requests.count: must be greater than or equal to 1, got 0"),
        (req("request_bytes: 15"), "traffic.requests.request_bytes: must be greater than or"
                                   " equal to 16, got 15 (allowed: >= 16 and <= 1e+06: 16 bytes"
                                   " carry the request's number"),
        (req("think_ms: -1"), "traffic.requests.think_ms: must be greater than or equal to 0"),
        (req("connection: pooled"), "traffic.requests.connection: must be 'persistent' or"
                                    " 'per_request', got 'pooled'"),
        (req("speed: 1"), "traffic.requests.speed: unknown key; allowed: count, request_bytes,"
                          " response, think_ms, connection"),
        (req("", "{dist: zipf}"), "traffic.requests.response.dist: must be 'fixed', 'choice',"
                                  " 'lognormal' or 'pareto', got 'zipf'"),
        (req("", "{dist: fixed, bytes: 0}"), "traffic.requests.response.bytes: must be greater"
                                             " than or equal to 1, got 0"),
        (req("", "{dist: fixed}"), "traffic.requests.response: dist fixed needs bytes"),
        (req("", "{dist: pareto, alpha: 1.2}"), "traffic.requests.response: dist pareto needs"
                                                " min_bytes"),
        (req("", "{dist: fixed, bytes: 5, sigma: 2}"), "traffic.requests.response.sigma: is"
                                                       " not a key of dist fixed"),
        (req("", "{dist: lognormal, median_bytes: 9, sigma: 0}"),
         "traffic.requests.response.sigma: must be greater than 0, got 0"),
        (req("", "{dist: lognormal, median_bytes: 0}"),
         "traffic.requests.response.median_bytes: must be greater than or equal to 1, got 0"),
        (req("", "{dist: lognormal, median_bytes: 9, max_bytes: 0}"),
         "traffic.requests.response.max_bytes: must be greater than or equal to 1, got 0"),
        (req("", "{dist: pareto, min_bytes: 0, alpha: 1}"),
         "traffic.requests.response.min_bytes: must be greater than or equal to 1, got 0"),
        (req("", "{dist: pareto, min_bytes: 5, alpha: 0}"),
         "traffic.requests.response.alpha: must be greater than or equal to 0.1, got 0"),
        (req("", "{dist: choice, sizes: []}"), "traffic.requests.response.sizes: must have at"
                                               " least 1 item, got []"),
        (req("", "{dist: choice, sizes: [10, 0]}"), "traffic.requests.response.sizes: every"
                                                    " size must be >= 1"),
        (req("", "{dist: choice, sizes: [10, 20], weights: [1]}"),
         "traffic.requests.response.weights: gives 1 weights for 2 sizes"),
        (req("", "{dist: choice, sizes: [10], weights: [-1]}"),
         "traffic.requests.response.weights: weights must be >= 0 and not all 0"),
        ("{tool: requests}", "traffic.requests: tool requests needs a `requests:` mapping"),
        (req(""), ""),  # a valid one, for contrast: parses
        ("{tool: requests, direction: upload, requests: {response: {dist: fixed, bytes: 9}}}",
         "traffic.direction: tool requests is a download"),
        ("{tool: requests, omit_s: 1, bytes: 9, requests: {response: {dist: fixed, bytes: 9}}}",
         "traffic.omit_s: is iperf3's warm-up; tool requests has none"),
        ("{tool: iperf3, requests: {response: {dist: fixed, bytes: 9}}}",
         "traffic.requests: only tool requests sends requests (tool is iperf3)"),
        ("{tool: blocks, cbr: {rate_mbit: 1}}", "traffic.cbr: only tool cbr streams frames"
                                                " (tool is blocks)"),
        ("{tool: cbr}", "traffic.cbr: tool cbr needs a `cbr:` mapping"),
        (cbr("rate_mbit: 0"), "traffic.cbr.rate_mbit: must be greater than 0, got 0"),
        (cbr("fps: 10"), "traffic.cbr.rate_mbit: required key missing"),
        (cbr("rate_mbit: 1, fps: 0"), "traffic.cbr.fps: must be greater than 0, got 0"),
        (cbr("rate_mbit: 1, frame_bytes: 15"), "traffic.cbr.frame_bytes: must be greater than"
                                               " or equal to 16, got 15"),
        (cbr("rate_mbit: 1, deadline_ms: 0"), "traffic.cbr.deadline_ms: must be greater than 0"),
        (cbr("rate_mbit: 1, deadline_ms: 20000"), "traffic.cbr.deadline_ms: must be less than"
                                                  " or equal to 10000, got 20000"),
        (cbr("rate_mbit: 1, fps: 10, frame_bytes: 100"), "traffic.cbr.frame_bytes: give fps or"
                                                         " frame_bytes, not both"),
        (cbr("rate_mbit: 0.001, fps: 100"), "traffic.cbr.fps: gives 1-byte frames at 0.001"
                                            " Mbit/s; a frame needs >= 16 bytes (lower fps)"),
        (cbr("rate_mbit: 100, frame_bytes: 16"), "traffic.cbr.frame_bytes: gives 781250"
                                                 " frames/s at 100 Mbit/s; at most 10000"),
        (cbr("rate_mbit: 1, burst: 2"), "traffic.cbr.burst: unknown key; allowed: rate_mbit,"
                                        " fps, frame_bytes, deadline_ms"),
        ("{tool: cbr, omit_s: 1, cbr: {rate_mbit: 1}}", "traffic.omit_s: is iperf3's warm-up;"
                                                        " tool cbr has none"),
    ],
)  # fmt: skip
def test_validate_names_every_bad_app_key_with_its_line(traffic_yaml: str, message: str) -> None:
    if not message:
        assert parse_campaign(HEAD + f"traffic: {traffic_yaml}\n", "app.yaml").traffic.requests
        return
    assert f"app.yaml:6: {message}" in errors(traffic_yaml)


def test_a_nested_error_points_at_its_own_line() -> None:
    text = HEAD + "traffic:\n  tool: cbr\n  cbr:\n    rate_mbit: 2\n    deadline_ms: -5\n"
    with pytest.raises(SpecError) as e:
        parse_campaign(text, "app.yaml")
    assert "app.yaml:10: traffic.cbr.deadline_ms: must be greater than 0" in str(e.value)


def test_response_sizes_are_seeded_and_follow_their_distribution() -> None:
    logn = {"dist": "lognormal", "median_bytes": 10_000, "sigma": 1.0, "max_bytes": 10**7}
    a, b = response_sizes(logn, 2000, 7), response_sizes(logn, 2000, 8)
    assert a == response_sizes(logn, 2000, 7) and a != b
    assert 8_000 < statistics.median(a) < 12_000
    pareto = {"dist": "pareto", "min_bytes": 1000, "alpha": 1.5, "max_bytes": 50_000}
    p = response_sizes(pareto, 2000, 1)
    assert (min(p) >= 1000, max(p), 1500 < statistics.median(p) < 1700) == (True, 50_000, True)
    choice = {"dist": "choice", "sizes": [100, 10_000], "weights": [9, 1]}
    c = response_sizes(choice, 2000, 3)
    assert set(c) == {100, 10_000} and 0.85 < c.count(100) / 2000 < 0.95
    assert response_sizes({"dist": "fixed", "bytes": 5}, 3, 1) == [5, 5, 5]


def row(seq: int, ok: bool, time_s: float | None, nbytes: int = 1000) -> str:
    doc = {"seq": seq, "bytes": nbytes, "start_ns": seq * 10**9, "time_s": time_s, "ok": ok}
    return json.dumps(doc | ({} if ok else {"error": "deadline: duration_s passed"}))


def test_parse_requests_gives_percentiles_of_completed_and_counts_failures() -> None:
    lines = [row(i, True, (i + 1) / 1000) for i in range(100)] + [row(100, False, None)]
    got = apps.parse_requests("\n".join(lines) + "\n")
    assert got.mean_s == pytest.approx(0.0505)
    assert got == apps.RequestTimes(
        n=101, completed=100, failures=1, p50_s=0.05, p95_s=0.095, p99_s=0.099,
        mean_s=got.mean_s, max_s=0.1, response_bytes=100_000,
        first_error="deadline: duration_s passed",
    )  # fmt: skip
    with pytest.raises(ValueError, match="no request"):
        apps.parse_requests("")


def frame(seq: int, delay_ms: float) -> str:
    sched = 10**12 + seq * 20 * 10**6
    return json.dumps({"seq": seq, "sched_ns": sched, "recv_ns": sched + int(delay_ms * 1e6)})


def test_parse_cbr_counts_late_and_missing_frames_as_misses() -> None:
    # 10 frames scheduled; 8 arrive, delays 10..80 ms; deadline 50 ms: 3 late + 2 missing
    text = "\n".join(frame(i, 10 * (i + 1)) for i in range(8))
    got = apps.parse_cbr(text, frames=10, deadline_ms=50)
    assert got == apps.FrameDelays(
        frames=10, received=8, misses=5, p50_ms=40, p95_ms=80, p99_ms=80, max_ms=80
    )
    assert got.miss_ratio == 0.5
    assert apps.parse_cbr("", 4, 50) == apps.FrameDelays(4, 0, 4, None, None, None, None)


def test_cbr_frame_size_and_rate_follow_from_either_key() -> None:
    c = parse_campaign(CBR, "app.yaml").traffic.cbr
    assert c is not None and (c.frame_size(), c.frames_per_s(), c.frames(4)) == (5000, 50, 200)
    by_size = parse_campaign(CBR.replace("fps: 50", "frame_bytes: 1250"), "a.yaml").traffic.cbr
    assert by_size is not None and (by_size.frame_size(), by_size.frames_per_s()) == (1250, 200)


def test_requests_plan_a_server_and_a_client_with_the_runs_seed() -> None:
    run = only_run(REQUESTS)
    c = commands.build(run, layout(run.paths), server_addr="10.0.0.1", rig="r")
    d = f"/tmp/mprig-r/{run.run_id}"
    assert c.server is not None
    assert c.server[1][3:9] == ["requests-server", "listen", "10.0.0.1", "5204", "1",
                                f"{d}/server/requests-served.json"]  # fmt: skip
    assert c.client[1][3:9] == ["requests-client", "connect", "10.0.0.1", "5204", "1",
                                f"{d}/client/requests.jsonl"]  # fmt: skip
    assert c.client[1][10] == "10.1.1.2"  # bound to the initial path's address
    cfg = json.loads(c.client[1][9])
    assert cfg == {"count": 20, "request_bytes": 100, "think_ms": 0, "connection": "persistent",
                   "response": {"dist": "fixed", "bytes": 1000},
                   "seed": run.workload_seed, "duration_s": 5}  # fmt: skip
    assert traffic.timeout_s(run.traffic) == 5 + traffic.MARGIN_S


def test_every_variant_of_a_repetition_asks_for_the_same_sizes() -> None:
    text = REQUESTS.replace(
        "variants:", "repetitions: 2\nvariants:\n  - {name: tcp, protocol: tcp, path: wifi}"
    )
    runs = plan.expand(parse_campaign(text, "app.yaml"))
    seeds = {(r.variant.name, r.repetition): apps.agent_config(r)["seed"] for r in runs}
    assert seeds[("tcp", 1)] == seeds[("mptcp", 1)] != seeds[("mptcp", 2)] == seeds[("tcp", 2)]
    assert len({r.seed for r in runs}) == 4  # the runs' own seeds stay apart


def test_a_tcp_variant_gets_plain_tcp_sockets() -> None:
    run = only_run(REQUESTS.replace("protocol: mptcp}", "protocol: tcp, path: wifi}"))
    c = commands.build(run, layout(run.paths), server_addr="10.0.0.1", rig="r")
    assert c.server is not None and (c.server[1][7], c.client[1][7]) == ("0", "0")


@pytest.mark.parametrize(("direction", "server_mode"), [("download", "cbr-send"),
                                                         ("upload", "cbr-recv")])  # fmt: skip
def test_cbr_direction_decides_who_sends(direction: str, server_mode: str) -> None:
    run = only_run(CBR.replace("duration_s: 4", f"duration_s: 4, direction: {direction}"))
    c = commands.build(run, layout(run.paths), server_addr="10.0.0.1", rig="r")
    assert c.server is not None
    modes = (c.server[1][3], c.client[1][3])
    names = (c.server[1][8].rsplit("/", 1)[1], c.client[1][8].rsplit("/", 1)[1])
    down = direction == "download"
    assert modes == (server_mode, "cbr-recv" if down else "cbr-send")
    assert names == (("cbr-sent.json", "cbr.jsonl") if down else ("cbr.jsonl", "cbr-sent.json"))
    assert json.loads(c.client[1][9]) == {"frame_bytes": 5000, "fps": 50.0, "frames": 200,
                                          "duration_s": 4, "deadline_ms": 80}  # fmt: skip


def test_plan_commands_show_the_agent_by_name() -> None:
    run = only_run(CBR)
    shown = commands.for_run(run, layout(run.paths), server_addr="10.0.0.1", rig="r")
    agents = [argv for _, argv in shown if argv[:2] == ["python3", "-c"]]
    assert [a[2] for a in agents] == ["mprig/run/apps_agent.py"] * 2


def test_other_tools_keep_their_run_ids() -> None:
    iperf = parse_campaign(HEAD + "traffic: {tool: iperf3}\n", "a.yaml")
    assert {"requests", "cbr"}.isdisjoint(plan._canonical(iperf, {})["traffic"])
