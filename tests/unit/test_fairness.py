"""Cross traffic without a rig: Jain's index, each flow's rate over the run's window from
its receiver's log, the flow logs as the program writes them, the commands a run with
competing flows and a shared bottleneck applies, and what run.json and runs.parquet get."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.cross import cross_columns, cross_part
from collectors.runinfo import RunInfo
from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.errors import HostError
from mprig.rig.layout import layout
from mprig.run import bottleneck, commands, crossflow, fairness

CAMPAIGN = """\
name: x
paths:
  - name: wifi
    kind: wired
    rate_mbit: 20
    cross_traffic:
      - {kind: tcp, cc: reno}
      - {kind: udp, rate_mbit: 2, direction: upload, start_s: 1, stop_s: 9, on_s: 1, off_s: 0.5}
  - name: cell
    kind: wired
    rate_mbit: 20
shared_bottleneck: {paths: [wifi, cell], rate_mbit: 10, limit_pkts: 50}
variants:
  - {name: mptcp, cc: lia}
"""


@pytest.mark.parametrize(
    ("rates", "want"),
    [([5, 5], 1.0), ([10, 0], 0.5), ([6, 3], 0.9), ([1, 1, 1, 0], 0.75), ([], None),
     ([0, 0], None)],
)  # fmt: skip
def test_jain(rates: list[float], want: float | None) -> None:
    assert fairness.jain(rates) == (pytest.approx(want) if want is not None else None)


SAMPLES = ((100.0, 0), (101.0, 1000), (102.0, 3000), (103.0, 3000))


@pytest.mark.parametrize(
    ("t", "want"),
    [(99.0, 0.0), (100.0, 0.0), (100.5, 500.0), (101.5, 2000.0), (103.0, 3000.0), (200.0, 3000.0)],
)  # fmt: skip
def test_bytes_between_samples_are_interpolated(t: float, want: float) -> None:
    assert fairness.bytes_at(SAMPLES, t) == want


def test_rate_counts_only_the_window() -> None:
    assert fairness.rate_bps(SAMPLES, 100.5, 101.5) == 1500 * 8
    with pytest.raises(ValueError, match="empty window"):
        fairness.rate_bps(SAMPLES, 101.0, 101.0)


RECEIVER = (
    '{"t": 100.0, "bytes": 0}\n{"t": 102.0, "bytes": 2500000}\n{"t": 104.0, "bytes": 5000000}\n'
)
SENDER = (
    '{"event": "start", "cc": "reno"}\n{"t": 100.0, "sent": 0}\n{"t": 104.0, "sent": 5100000}\n'
)


def test_parse_the_programs_logs() -> None:
    assert fairness.parse_receiver(RECEIVER + '{"event": "error", "t": 105, "message": "x"}\n') == (
        ((100.0, 0), (102.0, 2500000), (104.0, 5000000)), (105.0, "x"))  # fmt: skip
    assert fairness.parse_sender(SENDER) == ("reno", 5100000, None)
    with pytest.raises(ValueError):
        fairness.parse_receiver("not json\n")


def test_summary_counts_the_connection_as_one_flow() -> None:
    log = fairness.FlowLog(fairness.parse_receiver(RECEIVER)[0], "reno", 5100000, None, None)
    doc = fairness.summary(10e6, {"wifi.1": log}, (100.0, 104.0))
    assert (doc["flows"]["wifi.1"]["throughput_bps"], doc["main_bps"]) == (10e6, 10e6)
    assert (doc["jain_index"], doc["main_share"]) == (1.0, 0.5)
    unfair = fairness.summary(30e6, {"wifi.1": log}, (100.0, 104.0))
    assert (unfair["jain_index"], unfair["main_share"]) == (0.8, 0.75)


def run_and_links() -> tuple[plan.Run, tuple]:  # type: ignore[type-arg]
    c = parse_campaign(CAMPAIGN, "x.yaml")
    (run,) = plan.expand(c)
    return run, layout(c.paths)


def test_flows_get_ports_hosts_and_files_in_spec_order() -> None:
    run, _ = run_and_links()
    refs = crossflow.flows(run)
    got = [(r.label, r.port, r.sender, r.receiver, r.log("recv"), r.sender_log) for r in refs]
    assert got == [
        ("wifi.1", 5210, "server", "client", "cross-wifi-1.jsonl", "cross-wifi-1-sender.jsonl"),
        ("wifi.2", 5211, "client", "server", "cross-wifi-2.jsonl", "cross-wifi-2-sender.jsonl"),
    ]
    assert crossflow.cross_files(run) == {
        "client": ["cross-wifi-1.jsonl", "cross-wifi-2-sender.jsonl"],
        "server": ["tc-bottleneck.txt", "cross-wifi-1-sender.jsonl", "cross-wifi-2.jsonl"],
    }


def test_commands_of_the_flows_and_the_shared_bottleneck() -> None:
    run, links = run_and_links()
    cmds = commands.build(run, links, server_addr="10.0.0.1", rig="t")
    watch, *flows = cmds.background
    assert watch == ("server", bottleneck.watch_argv(), "tc-bottleneck.txt")
    shown = [(h, crossflow.shown(argv)[3:], log) for h, argv, log in flows]
    d = f"/tmp/mprig-t/{run.run_id}"
    assert shown == [
        ("server", ["send", "tcp", "listen", "10.0.0.1", "10.1.1.2", "5210", "reno", "0",
                    "0", "-1", "0", "0", "5201", f"{d}/server/cross-wifi-1-sender.jsonl"],
         "cross-wifi-1-send.log"),
        ("client", ["recv", "tcp", "connect", "10.1.1.2", "10.0.0.1", "5210", "reno", "0",
                    "0", "-1", "0", "0", "5201", f"{d}/client/cross-wifi-1.jsonl"],
         "cross-wifi-1-recv.log"),
        ("client", ["send", "udp", "-", "10.1.1.2", "10.0.0.1", "5211", "-", "2e+06",
                    "1", "9", "1", "0.5", "5201", f"{d}/client/cross-wifi-2-sender.jsonl"],
         "cross-wifi-2-send.log"),
        ("server", ["recv", "udp", "-", "10.0.0.1", "10.1.1.2", "5211", "-", "2e+06",
                    "1", "9", "1", "0.5", "5201", f"{d}/server/cross-wifi-2.jsonl"],
         "cross-wifi-2-recv.log"),
    ]  # fmt: skip
    server_setup = [
        " ".join(argv) for h, argv in cmds.setup if h == "server" and "mpbtl" in str(argv)
    ]
    assert "tc qdisc add dev mpbtl-down root netem delay 0ms rate 10mbit limit 50" in server_setup
    assert (
        "tc filter add dev p2 ingress protocol ip u32 match u32 0 0 action mirred egress"
        " redirect dev mpbtl-up"
    ) in server_setup
    assert [" ".join(a) for h, a in cmds.teardown if h == "server"] == [
        "tc qdisc del dev p1 clsact", "tc qdisc del dev p2 clsact",
        "ip link del mpbtl-down", "ip link del mpbtl-up",
    ]  # fmt: skip


def test_the_bench_stand_in_keeps_the_bottleneck_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    run, links = run_and_links()
    monkeypatch.setenv("MPRIG_BENCH_TBF_FOR_NETEM", "1")
    assert run.bottleneck is not None
    argv = bottleneck.setup_commands(run.bottleneck, links)[5][1]
    assert argv == ["tc", "qdisc", "add", "dev", "mpbtl-down", "root", "tbf", "rate", "10mbit",
                    "burst", "32kb", "limit", str(50 * 1514)]  # fmt: skip


def write_logs(d: Path, cc: str = "reno", error: str = "") -> None:
    (d / "cross-wifi-1.jsonl").write_text(RECEIVER)
    (d / "cross-wifi-1-sender.jsonl").write_text(SENDER.replace("reno", cc) + error)
    (d / "cross-wifi-2.jsonl").write_text('{"t": 100.0, "bytes": 0}\n{"t": 104.0, "bytes": 0}\n')
    (d / "cross-wifi-2-sender.jsonl").write_text('{"event": "start", "cc": ""}\n')


def test_run_json_record_and_its_failures(tmp_path: Path) -> None:
    run, _ = run_and_links()
    write_logs(tmp_path)
    doc = crossflow.cross_record(tmp_path, run, (100.0, 104.0), {"throughput_bps": 10e6})
    assert {k: v["throughput_bps"] for k, v in doc["flows"].items()} == {
        "wifi.1": 10e6,
        "wifi.2": 0,
    }
    assert (doc["competing"], doc["jain_index"]) == (["wifi.1"], 1.0)  # wifi.2 goes up
    write_logs(tmp_path, cc="cubic")
    with pytest.raises(HostError, match=r"cross flow wifi\.1: cc 'reno', got 'cubic'"):
        crossflow.cross_record(tmp_path, run, (100.0, 104.0), {})
    late = '{"event": "error", "t": 104.5, "message": "ConnectionResetError: reset"}\n'
    write_logs(tmp_path, error=late)  # the receiver was stopped first: after the run, fine
    assert crossflow.cross_record(tmp_path, run, (100.0, 104.0), {})["main_bps"] == 0
    write_logs(tmp_path, error=late.replace("104.5", "102"))
    with pytest.raises(HostError, match="ConnectionResetError"):
        crossflow.cross_record(tmp_path, run, (100.0, 104.0), {})


def test_collector_columns_from_the_bundle(tmp_path: Path) -> None:
    run, _ = run_and_links()
    write_logs(tmp_path)
    window = {"window": [100.0, 104.0]}
    record = {**plan.run_json(run), "traffic": {"direction": "download"},
              "cross_traffic": window, "summary": {"throughput_bps": 5e6}}  # fmt: skip
    part = cross_part(RunInfo(tmp_path, json.loads(json.dumps(record))), 10e6)
    assert part.problems == []
    assert part.metrics["columns"] == {
        "jain_index": 1.0, "main_share": 0.5,
        "cross_bps.wifi.1": 10e6, "cross_bps.wifi.2": 0.0,
        "cross_share.wifi.1": 0.5,  # wifi.2 goes up: it shares no queue with the run
    }  # fmt: skip
    (series, _) = part.series
    assert list(series["value"]) == [10e6, 10e6]
    assert cross_columns([part.metrics["columns"]]) == [
        "jain_index", "main_share", "cross_bps.wifi.1", "cross_bps.wifi.2",
        "cross_share.wifi.1"]  # fmt: skip
    assert cross_columns([{"throughput_bps": 1.0}]) == []
    (tmp_path / "cross-wifi-1.jsonl").unlink()
    assert cross_part(RunInfo(tmp_path, record), 10e6).problems[0].startswith(
        "cross traffic: FileNotFoundError")  # fmt: skip


@pytest.mark.parametrize(
    ("used", "shared", "direction", "want"),
    [
        (["wifi"], [], "download", ["wifi.1"]),  # a tcp run on wifi: its path's flows, its way
        (["wifi"], [], "upload", ["wifi.2"]),
        (["cell"], [], "download", []),  # another path's flows queue elsewhere
        (["cell"], ["wifi", "cell"], "download", ["wifi.1"]),  # ... unless a bottleneck joins them
        (["cell"], ["wifi", "lte"], "download", []),  # a bottleneck the connection misses
    ],
)  # fmt: skip
def test_competing_flows_share_a_queue_with_the_connection(
    used: list[str], shared: list[str], direction: str, want: list[str]
) -> None:
    run, _ = run_and_links()
    refs = crossflow.flows(run)  # wifi.1 sent by the server, wifi.2 by the client
    assert crossflow.competing(refs, used, shared, direction) == want
    assert crossflow.used_paths("tcp", "cell", None, ["wifi", "cell"]) == ["cell"]
    assert crossflow.used_paths("mptcp", None, None, ["wifi", "cell"]) == ["wifi", "cell"]
    assert crossflow.used_paths("mptcp", None, ["wifi"], ["wifi", "cell"]) == ["wifi"]


def test_without_a_competing_flow_there_is_no_index() -> None:
    log = fairness.FlowLog(((0.0, 0), (1.0, 1000)), "reno", None, None, None)
    doc = fairness.summary(5e6, {"cell.1": log}, (0.0, 1.0), [])
    assert (doc["jain_index"], doc["main_share"], doc["flows"]["cell.1"]["throughput_bps"]) == (
        None, None, 8000.0)  # fmt: skip
