"""`mprig collect` on a real run bundle (tests/captures/test_collect/mptcp_download: a 1 s
MPTCP iperf3 download over two tbf-limited paths, 2 and 1 Mbit/s, made on this machine by
tests/integration/realbundle.py), next to failed, corrupt and damaged copies of it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from collectors.analyze import analyze_pcap
from collectors.apps_part import COLUMNS as APP_COLUMNS
from collectors.collect import (
    BLOCK_METRICS,
    SERIES_COLUMNS,
    CampaignOutcome,
    Options,
    campaign_dirs,
    collect_campaign,
)
from collectors.directions import direction
from collectors.kernelofo import ofo_skbs
from collectors.nstat import sender_counters
from mprig.cli.main import main
from mprig.errors import UsageError
from mprig.run import bundle as bundles

FIXTURE = Path(__file__).parents[1] / "captures" / "test_collect" / "mptcp_download"
RATES = {"wifi": 2e6, "cell": 1e6}
CLIENT = {"10.55.1.1": "wifi", "10.55.2.1": "cell"}
CAPTURE_METRICS = ("throughput_bps", "goodput_bps", "ooo_ratio", "ooo_mean_bytes")
CAPTURE_METRICS += ("ooo_max_bytes", "ooo_max_packets", "retransmitted_packets")
CAPTURE_METRICS += ("duplicate_packets", "reinjected_bytes", "unmapped_bytes")
CAPTURE_METRICS += ("rcvbuf_k_max_bytes", "ooo_arrivals", "goodput_k_p5_bps")
ALL_METRICS = (*CAPTURE_METRICS, "iperf3_bps")
PATH_METRICS = ("link_util", "throughput_bps", "wire_bps", "srtt_ms", "cwnd_mean")
PATH_METRICS += ("idle_share", "notsent_mean", "rwnd_limited_share", "sndbuf_limited_share")
PATH_COLUMNS = [f"{m}.{p}" for m in PATH_METRICS for p in ("cell", "wifi")]


def make_campaign(root: Path) -> Path:
    """results/fx with: ok (the fixture, with a sweep point), failed, corrupt (run.json is
    not JSON) and damaged (ss-server.txt overwritten after the run)."""
    camp = root / "fx"
    for name in ("ok", "damaged", "failed", "corrupt"):
        shutil.copytree(FIXTURE, camp / name)
        (camp / name / "label.txt").write_text(name)  # each run's own artifacts (no copies)
        record = json.loads((camp / name / "run.json").read_text())
        record |= {"run_id": name, "campaign": "fx", "point": {"paths.wifi.down.rate_mbit": 2.0}}
        record["artifacts"] |= {"label.txt": bundles.sha256_file(camp / name / "label.txt")}
        if name == "failed":
            record |= {"status": "failed", "reason": "iperf3 exited with status 1"}
        (camp / name / "run.json").write_text(json.dumps(record))
    (camp / "corrupt" / "run.json").write_text("{not json")
    (camp / "damaged" / "ss-server.txt").write_text("garbage\n")
    (camp / ".x.partial").mkdir()  # a staging directory: never collected
    return camp


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> CampaignOutcome:
    return collect_campaign(make_campaign(tmp_path_factory.mktemp("results")), Options())


def row(outcome: CampaignOutcome, run_id: str) -> dict[str, object]:
    return next(r.row for r in outcome.runs if r.run_id == run_id)


def ss_means() -> dict[str, tuple[float, float, float, float]]:
    """Per path (mean srtt, mean cwnd, share of samples with Send-Q 0, mean notsent) of the
    data subflows, read with a regex: the data connection is the one whose subflows acked
    the most bytes; the queue figures count samples from the first acknowledged byte."""
    text = (FIXTURE / "ss-server.txt").read_text()
    line = r"^tcp +\S+ +\d+ +(\d+) .*\[::ffff:(10\.55\.\d\.1)\]:(\d+)\n\t(.*)"  # Send-Q, peer
    rows = re.findall(line, text, re.M)
    acked: dict[str, int] = {}
    for _, _, port, info in rows:
        acked[port] = max(acked.get(port, 0), int(re.search(r"bytes_acked:(\d+)", info)[1]))
    ports = {p for p in acked if acked[p] > 10_000}
    out = {}
    for path in ("wifi", "cell"):
        infos = [(int(q), i) for q, a, p, i in rows if p in ports and CLIENT[a] == path]
        rtts = [float(re.search(r" rtt:([\d.]+)/", i)[1]) for _, i in infos]
        cwnds = [int(re.search(r" cwnd:(\d+)", i)[1]) for _, i in infos]
        fed = [(q, i) for q, i in infos if int(re.search(r"bytes_acked:(\d+)", i)[1]) > 0]
        notsent = [int(m[1]) if (m := re.search(r"notsent:(\d+)", i)) else 0 for _, i in fed]
        idle = sum(q == 0 for q, _ in fed) / len(fed)
        out[path] = (sum(rtts) / len(rtts), sum(cwnds) / len(cwnds), idle, sum(notsent) / len(fed))
    return out


def limited_shares() -> dict[str, tuple[float, float]]:
    """Per path (rwnd_limited, sndbuf_limited) over busy, ms, at each data subflow's last
    sample (the kernel's counters are cumulative), read with a regex; an absent limit is 0."""
    text = (FIXTURE / "ss-server.txt").read_text()
    rows = re.findall(r"^tcp .*\[::ffff:(10\.55\.\d\.1)\]:(\d+)\n\t(.*)", text, re.M)
    last = {(addr, port): info for addr, port, info in rows if "busy:" in info}
    acked = {k: int(re.search(r"bytes_acked:(\d+)", i)[1]) for k, i in last.items()}

    def ms(key: str, infos: list[str]) -> int:
        return sum(int(m[1]) if (m := re.search(rf" {key}:(\d+)ms", i)) else 0 for i in infos)

    out = {}
    for path in ("wifi", "cell"):
        infos = [i for k, i in last.items() if CLIENT[k[0]] == path and acked[k] > 10_000]
        busy = ms("busy", infos)
        out[path] = (ms("rwnd_limited", infos) / busy, ms("sndbuf_limited", infos) / busy)
    return out


def sender_delta(*counters: str) -> int:
    """The server's (the sender's) nstat counters summed, after minus before, by regex."""

    def total(when: str) -> int:
        text = (FIXTURE / f"nstat-server-{when}.txt").read_text()
        return sum(int(re.search(rf"^{c} +(\d+)", text, re.M)[1]) for c in counters)

    return total("after") - total("before")


def test_sender_counters_sum_recoveries_and_are_null_without_nstat() -> None:
    deltas = {"TcpExtTCPTimeouts": 4, "TcpExtTCPRenoRecovery": 2, "TcpExtTCPSackRecovery": 13}
    assert sender_counters(deltas) == {"sender_timeouts": 4, "sender_fast_recoveries": 15}
    assert sender_counters({}) == {"sender_timeouts": 0, "sender_fast_recoveries": 0}
    assert sender_counters(None) == {"sender_timeouts": None, "sender_fast_recoveries": None}


def expected_capture() -> tuple[dict[str, object], dict[str, float], dict[str, float]]:
    """The analyser's figures for the connection whose subflow ports ss saw carry data."""
    text = (FIXTURE / "ss-server.txt").read_text()
    acked = re.findall(r"^tcp .*\]:(\d+)\n\t.*bytes_acked:(\d+)", text, re.M)
    ports = {p for p, b in acked if int(b) > 10_000}
    conns = analyze_pcap(FIXTURE / "client.pcap").connections
    conn = next(c for c in conns if {str(s.dport) for s in c.subflows} == ports and
                c.subflows[0].src == "10.55.9.1")  # fmt: skip
    summary = conn.summary()
    per_path = {CLIENT[s["dst"]]: s["throughput_bps"] for s in summary["subflows"]}
    wire = {
        CLIENT[s["dst"]]: (s["ip_bytes"] + 14 * s["packets"]) * 8 / summary["duration_s"]
        for s in summary["subflows"]
    }
    return {m: summary[m] for m in CAPTURE_METRICS}, per_path, wire


def test_complete_run_row(collected: CampaignOutcome) -> None:
    capture, per_path, wire = expected_capture()
    srtt_cwnd = ss_means()
    ss_paths = json.loads((collected.root / "ok" / "metrics.json").read_text())["ss_paths"]
    iperf3 = json.loads((FIXTURE / "iperf3-client.json").read_text())
    expected: dict[str, object] = {
        "campaign": "fx", "run_id": "ok", "variant": "mptcp", "protocol": "mptcp",
        "status": "complete", "index": 0, "repetition": 1, "seed": 1,
        "param.paths.wifi.down.rate_mbit": 2.0,
        **capture,
        "iperf3_bps": iperf3["end"]["sum_received"]["bits_per_second"],
        "ss_acked_bps": pytest.approx(sum(p["acked_bps"] for p in ss_paths.values())),
        # the sender (server, a download) counted 13 SACK recoveries and no timeout; the
        # receiver none of either
        "sender_timeouts": sender_delta("TcpExtTCPTimeouts"),
        "sender_fast_recoveries": sender_delta("TcpExtTCPSackRecovery", "TcpExtTCPRenoRecovery"),
        **dict.fromkeys(BLOCK_METRICS),  # null: an iperf3 run writes no blocks
        **dict.fromkeys(APP_COLUMNS),  # nor requests or frames
    }  # fmt: skip
    limited = limited_shares()
    for path in ("wifi", "cell"):
        expected[f"wire_bps.{path}"] = pytest.approx(wire[path])
        expected[f"link_util.{path}"] = per_path[path] / RATES[path]
        expected[f"throughput_bps.{path}"] = per_path[path]
        expected[f"srtt_ms.{path}"] = pytest.approx(srtt_cwnd[path][0])
        expected[f"cwnd_mean.{path}"] = pytest.approx(srtt_cwnd[path][1])
        expected[f"idle_share.{path}"] = pytest.approx(srtt_cwnd[path][2])
        expected[f"notsent_mean.{path}"] = pytest.approx(srtt_cwnd[path][3])
        rwnd, sndbuf = limited[path]
        expected[f"rwnd_limited_share.{path}"] = pytest.approx(rwnd)
        expected[f"sndbuf_limited_share.{path}"] = pytest.approx(sndbuf)
    assert row(collected, "ok") == expected
    # the paths carried data near their configured rates
    assert [round(float(expected[f"link_util.{p}"]), 1) for p in ("wifi", "cell")] == [0.9, 0.8]


def test_metrics_json_has_kernel_cross_check_and_nstat(collected: CampaignOutcome) -> None:
    doc = json.loads((collected.root / "ok" / "metrics.json").read_text())
    after = (FIXTURE / "nstat-client-after.txt").read_text()
    before = (FIXTURE / "nstat-client-before.txt").read_text()

    def counter(text: str) -> int:
        return int(re.search(r"^MPTcpExtOFOQueue\s+(\d+)", text, re.M)[1])

    kernel = counter(after) - counter(before)
    # ours: every connection towards the client, as the namespace-wide counter counts
    towards = [c for c in analyze_pcap(FIXTURE / "client.pcap").connections
               if c.subflows[0].dst in CLIENT]  # fmt: skip
    ooo = sum(int(c.raw["ooo_packets"]) for c in towards)
    skbs = sum(ofo_skbs(c.arrivals) for c in towards)
    assert ooo >= doc["connection"]["ooo_packets"] > 0
    assert (doc["kernel_ofo"], doc["kernel_ofo_ratio"]) == (
        {"ooo_packets": ooo, "ooo_skbs": skbs, "MPTcpExtOFOQueue": kernel}, skbs / kernel
    )  # fmt: skip
    assert doc["nstat"]["client"]["MPTcpExtOFOQueue"] == kernel
    assert (doc["format"], doc["problems"], sorted(doc["nstat"])) == (1, [], ["client", "server"])
    assert [s["path"] for s in doc["subflows"]] == ["wifi", "cell"]


def test_failed_run_has_its_status_and_null_metrics(collected: CampaignOutcome) -> None:
    got = row(collected, "failed")
    assert got == {
        "campaign": "fx", "run_id": "failed", "variant": "mptcp", "protocol": "mptcp",
        "status": "failed", "index": 0, "repetition": 1, "seed": 1,
        "param.paths.wifi.down.rate_mbit": 2.0,
    }  # fmt: skip
    assert not (collected.root / "failed" / "metrics.json").exists()


def test_corrupt_and_damaged_runs_are_reported_by_file(collected: CampaignOutcome) -> None:
    assert collected.problems[0] == (
        "corrupt/run.json: unreadable (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1))"
    )
    # an artifact changed after the run: the run is corrupt, excluded from the numbers
    assert collected.problems[1:] == [
        "damaged: corrupt, excluded: artifact ss-server.txt: sha256 differs from run.json",
    ]
    assert row(collected, "corrupt") == {"run_id": "corrupt", "campaign": "fx", "status": "corrupt"}
    assert row(collected, "damaged") == {
        "campaign": "fx", "run_id": "damaged", "variant": "mptcp", "protocol": "mptcp",
        "status": "corrupt", "index": 0, "repetition": 1, "seed": 1,
        "param.paths.wifi.down.rate_mbit": 2.0,
    }  # fmt: skip
    assert not (collected.root / "damaged" / "metrics.json").exists()


def test_runs_parquet_columns_and_types(collected: CampaignOutcome) -> None:
    runs = pd.read_parquet(collected.parquet)
    assert list(runs.columns) == [
        "campaign", "run_id", "variant", "protocol", "status", "index", "repetition", "seed",
        "param.paths.wifi.down.rate_mbit",
        "throughput_bps", "goodput_bps", "iperf3_bps", "ss_acked_bps", "ooo_ratio",
        "ooo_mean_bytes", "goodput_k_p5_bps", "ooo_max_bytes", "ooo_max_packets", "ooo_arrivals",
        "retransmitted_packets", "duplicate_packets",
        "reinjected_bytes", "unmapped_bytes", "rcvbuf_k_max_bytes",
        "sender_timeouts", "sender_fast_recoveries", *BLOCK_METRICS,
        *APP_COLUMNS, *PATH_COLUMNS,
    ]  # fmt: skip
    assert list(runs["run_id"]) == ["corrupt", "damaged", "failed", "ok"]
    assert list(runs["status"]) == ["corrupt", "corrupt", "failed", "complete"]
    kinds = {str(t) for c, t in runs.dtypes.items() if c in ("ooo_max_bytes", "index")}
    assert (kinds, str(runs.dtypes["ooo_ratio"])) == ({"Int64"}, "float64")
    assert runs.loc[runs["run_id"] == "failed", list(ALL_METRICS)].isna().all(axis=None)
    assert all(direction(c) is not None for c in [*ALL_METRICS, *PATH_COLUMNS])


def test_timeseries_parquet(collected: CampaignOutcome) -> None:
    ts = pd.read_parquet(collected.root / "ok" / "timeseries.parquet")
    assert {c: str(t) for c, t in ts.dtypes.items()} == {
        c: t.replace("string", "string") for c, t in SERIES_COLUMNS.items()
    }
    kinds = sorted(set(zip(ts["source"], ts["metric"], ts["path"].fillna("-"), strict=True)))
    assert kinds == [
        ("capture", "goodput_bps", "-"),
        ("capture", "ooo_bytes_max", "-"),
        ("capture", "ooo_packets_max", "-"),
        ("capture", "throughput_bps", "-"),
        ("capture", "throughput_bps", "cell"),
        ("capture", "throughput_bps", "wifi"),
        ("iperf3", "iperf3_bps", "-"),
        *[("ss", m, p) for m in ("bytes_acked", "cwnd", "delivery_rate_bps",
                                 "pacing_rate_bps", "retrans", "rttvar_ms", "srtt_ms",
                                 "ssthresh") for p in ("cell", "wifi")],
    ]  # fmt: skip
    # t counts from the run's recorded start; every series lies inside the run
    started = json.loads((FIXTURE / "run.json").read_text())["timings"]["started"]
    assert (ts["t"] == ts["time"] - started).all() and ts["t"].between(0, 3).all()


def test_second_collect_reuses_and_writes_the_same(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path)
    first = collect_campaign(camp, Options())
    table, metrics = pd.read_parquet(first.parquet), (camp / "ok" / "metrics.json").read_bytes()
    second = collect_campaign(camp, Options())
    assert [r.reused for r in second.runs] == [False, False, False, True]
    assert second.problems == first.problems
    pd.testing.assert_frame_equal(pd.read_parquet(second.parquet), table)
    assert (camp / "ok" / "metrics.json").read_bytes() == metrics
    third = collect_campaign(camp, Options(k_block=50))  # other options: analysed again
    doc = json.loads((camp / "ok" / "metrics.json").read_text())
    assert ([r.reused for r in third.runs], doc["inputs"]["k_block"]) == (
        [False, False, False, False], 50
    )  # fmt: skip


def test_cli_collect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    camp = make_campaign(tmp_path)
    shutil.rmtree(camp / "corrupt")
    shutil.rmtree(camp / "damaged")
    assert main(["collect", str(tmp_path), "--k", "100", "--bin", "0.2"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"{camp / 'runs.parquet'}: 2 runs, " + out.split(", ")[-1][:-1]]
    assert [line.split(" (")[0] for line in err.splitlines()] == [
        "[1/2] fx/failed: failed", "[2/2] fx/ok: complete"
    ]  # fmt: skip
    (camp / "ok" / "iperf3-client.json").write_text("")
    assert main(["collect", str(camp), "--quiet", "--bin", "0.2"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "mprig: fx/ok: corrupt, excluded: artifact iperf3-client.json: sha256 differs from "
        "run.json",
        "mprig: 1 artifact problem(s); their metrics are null",
    ]


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:  # an option error, from the bounded type
        main(["collect", str(tmp_path), "--k", "0"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "mprig collect: error: argument --k: 0 is out of range; allowed: 1 to 1e+06"
        " (packets per block; no capture mprig records holds more)"
    )
    assert main(["collect", str(tmp_path)]) == 2
    assert main(["collect", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"mprig: error: {tmp_path}: no run bundles (no */run.json); run `mprig run` first",
        f"mprig: error: {tmp_path / 'nope'}: not a directory; give results/<campaign> or results/",
    ]
    with pytest.raises(SystemExit):
        main(["collect", "--help"])
    assert "mprig collect results/smoke --k 50 --bin 0.05" in capsys.readouterr().out


def test_campaign_dirs(tmp_path: Path) -> None:
    for name in ("b", "a"):
        shutil.copytree(FIXTURE, tmp_path / name / "r1")
    (tmp_path / "notes").mkdir()
    assert campaign_dirs(tmp_path) == [tmp_path / "a", tmp_path / "b"]
    assert campaign_dirs(tmp_path / "a") == [tmp_path / "a"]
    with pytest.raises(UsageError):
        campaign_dirs(tmp_path / "notes")


def test_plain_tcp_run_without_tcp_data_in_its_capture_falls_back_to_ss(tmp_path: Path) -> None:
    """A TCP run whose capture holds no plain TCP data (here: the MPTCP fixture relabelled)
    says so and takes its path throughput from ss (a real TCP capture:
    test_collect_instrument.py)."""
    camp = tmp_path / "fx"
    shutil.copytree(FIXTURE, camp / "tcp")
    record = json.loads((camp / "tcp" / "run.json").read_text())
    record["variant"] |= {"name": "tcp_wifi", "protocol": "tcp", "path": "wifi"}
    (camp / "tcp" / "run.json").write_text(json.dumps(record))
    outcome = collect_campaign(camp, Options())
    doc = json.loads((camp / "tcp" / "metrics.json").read_text())
    acked = {p: doc["ss_paths"][p]["acked_bps"] for p in ("wifi", "cell")}
    got = outcome.runs[0].row
    assert (outcome.problems, doc["path_throughput_source"]) == (
        ["mptcp_download/client.pcap: no TCP data towards the client"], "ss"
    )  # fmt: skip
    assert {k: got[k] for k in got if k.endswith((".wifi", ".cell")) and "put" in k} == {
        "throughput_bps.wifi": acked["wifi"], "throughput_bps.cell": acked["cell"],
    }  # fmt: skip
    assert (got["link_util.wifi"], got["ooo_ratio"]) == (acked["wifi"] / RATES["wifi"], None)


def test_bulk_run_keeps_bulk_json_and_has_no_iperf3(tmp_path: Path) -> None:
    camp = tmp_path / "fx"
    shutil.copytree(FIXTURE, camp / "bulk")
    record = json.loads((camp / "bulk" / "run.json").read_text())
    record["traffic"] |= {"tool": "bulk", "bytes": 1000}
    record["run_id"] = "bulk"
    (camp / "bulk" / "run.json").write_text(json.dumps(record))
    bulk = {"bytes": 1000, "sha256_sent": "ab", "sha256_received": "ab", "bytes_received": 1000,
            "seconds": 0.5}  # fmt: skip
    (camp / "bulk" / "bulk.json").write_text(json.dumps(bulk))
    for name in ("iperf3-client.json", "iperf3-server.json"):
        (camp / "bulk" / name).unlink()
    # the runner lists the artifacts a bulk run wrote (no iperf3 files, bulk.json)
    record["artifacts"] = bundles.artifact_hashes(camp / "bulk")
    (camp / "bulk" / "run.json").write_text(json.dumps(record))
    outcome = collect_campaign(camp, Options())
    doc = json.loads((camp / "bulk" / "metrics.json").read_text())
    assert (doc["bulk"], doc["iperf3"], doc["row"]["iperf3_bps"]) == (bulk, {}, None)
    assert outcome.problems == []
    assert doc["row"]["goodput_bps"] > 0
