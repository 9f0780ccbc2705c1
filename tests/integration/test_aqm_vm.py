"""Queue disciplines, jitter and Gilbert-Elliott loss on the virtual rig, judged on measured
data (issue 18 part 5, with part 4's latency under load). In the VM (Debian's stock kernel
has netem, fq_codel and cake) one campaign of six 5 s TCP downloads with the latency probe
(an ICMP timestamp request every 50 ms over each path):

- path `lan`: 10 Mbit/s, 10 ms each way, a deep buffer (1000 packets: 1.2 s at the rate),
  swept over `aqm: pfifo`, `fq_codel` and `cake`. Under a bulk download the probe's RTT p50
  must be several times lower with fq_codel and cake (the probe is a flow of its own, and
  CoDel keeps the bulk flow's queue near its 5 ms target) than with the deep FIFO. The
  download runs Reno, which fills a FIFO until it drops: CUBIC's HyStart leaves slow start
  on the first RTT rise, and how soon that comes depends on the emulated guest's timing
  (with CUBIC a deep FIFO's RTT p50 was 134 ms on a quiet host and 89 ms in a CI run,
  against 4x fq_codel's 25 wanted; with Reno 1158 ms against 25);
- path `jit`: 10 ms each way with 10 ms of normal jitter and Gilbert-Elliott loss (p 3 %,
  r 30 %, every packet lost in the bad state: 9.1 % mean loss per direction, bursts of 3.3
  packets on average). Idle, its RTT spread must show the jitter (RTT standard deviation
  about 14 ms over two directions) against the idle `lan`'s; loaded, netem's drop count
  must match the chain's mean loss, TCP must retransmit and the probe must lose probes.

Every path's one-way delays come from the same probes (ICMP timestamps; one clock in the
VM): idle, lan's are its 10 ms each way; under the download the FIFO's queue is on the way
down only.

One VM boot for the module (about 2 minutes under software emulation); run it under
`flock /tmp/mprig-vm.lock`.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from vmcampaign import campaign_in_vm

from collectors.collect import Options, collect_campaign
from mprig.rig import layout
from mprig.run import latency

pytestmark = [pytest.mark.vm, pytest.mark.shared_vm, pytest.mark.slow]

CAMPAIGN = """\
name: aqm
paths:
  - {name: lan, kind: wired, rate_mbit: 10, delay_ms: 10, limit_pkts: 1000}
  - name: jit
    kind: cellular
    rate_mbit: 10
    delay_ms: 10
    jitter_ms: 10
    jitter_dist: normal
    ge_p_pct: 3
    ge_r_pct: 30
variants:
  - {name: tcp_lan, protocol: tcp, path: lan, cc: reno}
  - {name: tcp_jit, protocol: tcp, path: jit}
sweep:
  axes:
    paths.lan.aqm: [pfifo, fq_codel, cake]
traffic: {tool: iperf3, duration_s: 5, ping_interval_ms: 50}
capture: {enabled: false}
"""
AQMS = ("pfifo", "fq_codel", "cake")
GE_MEAN_LOSS = 3 / (3 + 30)  # p / (p + r): the bad state's share, every packet lost there


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[tuple[str, str], dict[str, Any]]]:
    """(variant, lan aqm) -> run.json, plus the bundle directory under `_dir`."""
    with campaign_in_vm(CAMPAIGN, "aqm", rig="h1aqm", timeout=900) as results:
        collect_campaign(results, Options())
        out = {}
        for rec_path in sorted(results.glob("*/run.json")):
            rec = json.loads(rec_path.read_text())
            assert rec["status"] == "complete", rec.get("reason")
            rec["_dir"] = rec_path.parent
            rec["_row"] = _row(results, rec["run_id"])
            out[(rec["variant"]["name"], rec["point"]["paths.lan.aqm"])] = rec
        assert len(out) == 6
        yield out


def _row(results: Path, run_id: str) -> dict[str, Any]:
    frame = pd.read_parquet(results / "runs.parquet")
    return dict(frame[frame["run_id"] == run_id].iloc[0])


def _rtts(rec: dict[str, Any], path: str) -> list[float]:
    """The probe's RTTs over `path` while the traffic ran."""
    start, end = rec["summary"]["latency_window"]
    echoes = latency.parse((rec["_dir"] / f"ping-{path}.jsonl").read_text())
    return [e.rtt_ms for e in echoes if start <= e.sent <= end and e.rtt_ms is not None]


def _netem_counts(rec: dict[str, Any], path: str) -> tuple[int, int]:
    """(sent, dropped) packets of `path`'s netem, both directions, from the after snapshot."""
    router = next(k["router"] for k in rec["links"] if k["name"] == path)
    text = (rec["_dir"] / f"tc-{router}-after.txt").read_text()
    devs = f"{layout.ROUTER_CLIENT_IF}|{layout.ROUTER_SERVER_IF}"
    pattern = (
        rf"qdisc netem \S+ dev (?:{devs}) root .*?\n\s*Sent \d+ bytes (\d+) pkt \(dropped (\d+)"
    )
    counts = re.findall(pattern, text)
    assert len(counts) == 2, text
    return sum(int(c[0]) for c in counts), sum(int(c[1]) for c in counts)


def test_fq_codel_and_cake_keep_latency_under_load_low_where_a_deep_fifo_does_not(
    runs: dict[tuple[str, str], dict[str, Any]],
) -> None:
    lan = {aqm: runs[("tcp_lan", aqm)] for aqm in AQMS}
    p50 = {aqm: r["summary"]["latency"]["lan"]["rtt_p50_ms"] for aqm, r in lan.items()}
    print(f"lan RTT p50 under a bulk download (ms): {p50}")
    for aqm in ("fq_codel", "cake"):
        assert p50["pfifo"] > 4 * p50[aqm], p50
        assert p50[aqm] < 20 + 30, p50  # the 20 ms base RTT plus a few CoDel targets
    for r in lan.values():  # the bulk flow loaded the 10 Mbit/s path in every run: 40 %
        # at least (a 5 s run under emulation with a host busy beside it came to 4.85
        # Mbit/s; a probe alone moves 0.01)
        assert r["summary"]["throughput_bps"] > 4e6, r["summary"]
        # the probe ran through the run: 60 echoes due; under emulation the last one can
        # fall after the traffic ends (a CI run counted 59)
        assert r["summary"]["latency"]["lan"]["sent"] >= 54, r["summary"]["latency"]
    assert {aqm: _lan_tree(r) for aqm, r in lan.items()} == {
        "pfifo": ["netem 1: (root)", "tbf 2: (1:1)", "pfifo 3: (2:1)"],
        "fq_codel": ["netem 1: (root)", "tbf 2: (1:1)", "fq_codel 3: (2:1)"],
        "cake": ["netem 1: (root)", "cake 2: (1:1)"],
    }


def test_one_way_delays_show_where_the_queue_is(
    runs: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """One clock in the VM: the probe's one-way delays (ICMP timestamps, whole ms). Idle,
    lan is 10 ms each way; under the download with a deep FIFO the queue is on the way
    down only."""
    idle = runs[("tcp_jit", "pfifo")]["summary"]["latency"]["lan"]
    fifo = runs[("tcp_lan", "pfifo")]["summary"]["latency"]["lan"]
    print(f"lan one-way p50 (ms): idle up {idle['up_p50_ms']} down {idle['down_p50_ms']};"
          f" pfifo under load up {fifo['up_p50_ms']} down {fifo['down_p50_ms']}")  # fmt: skip
    assert 9 <= idle["up_p50_ms"] <= 15 and 9 <= idle["down_p50_ms"] <= 15, idle
    assert 9 <= fifo["up_p50_ms"] <= 20, fifo
    assert fifo["down_p50_ms"] > 100, fifo
    assert (
        abs(fifo["up_p50_ms"] + fifo["down_p50_ms"] - fifo["rtt_p50_ms"]) < 0.2 * fifo["rtt_p50_ms"]
    )


def _lan_tree(rec: dict[str, Any]) -> list[str]:
    """The download direction's qdiscs on lan's router, as the runner read them back."""
    router = next(k["router"] for k in rec["links"] if k["name"] == "lan")
    return list(rec["settings"][router]["qdisc_tree"][layout.ROUTER_CLIENT_IF])


def test_jitter_shows_in_the_rtt_spread(runs: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Each path idle (the other one loaded): the interquartile range of the RTT, robust to
    the emulated VM's occasional stalls (an idle lan's standard deviation reached 6 ms)."""
    jit = [rtt for aqm in AQMS for rtt in _rtts(runs[("tcp_lan", aqm)], "jit")]
    lan = [rtt for aqm in AQMS for rtt in _rtts(runs[("tcp_jit", aqm)], "lan")]
    iqr = {k: _iqr(v) for k, v in (("jit", jit), ("lan", lan))}
    sd = statistics.stdev(jit)
    print(f"idle RTT: IQR jit {iqr['jit']:.1f} ms, lan {iqr['lan']:.1f} ms; jit sd {sd:.1f} ms")
    # two normal 10 ms jitters: RTT sd 14 ms, IQR 19 ms (less where clipped at 0 ms)
    assert 10 < iqr["jit"] < 30 and 7 < sd < 25, (iqr, sd)
    assert iqr["jit"] > 3 * iqr["lan"], iqr
    s = runs[("tcp_lan", "fq_codel")]["summary"]["latency"]["jit"]
    assert s["rtt_p99_ms"] - s["rtt_p50_ms"] > 10, s


def _iqr(values: list[float]) -> float:
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]


def test_gilbert_elliott_loss_shows_in_drops_retransmissions_and_probe_loss(
    runs: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """netem's drops on the loaded jit path, its three runs and both directions pooled
    (about 3800 packets, 100 bad-state episodes: the share's relative spread is about
    13 %)."""
    counts = [_netem_counts(runs[("tcp_jit", aqm)], "jit") for aqm in AQMS]
    sent, dropped = (sum(c[i] for c in counts) for i in (0, 1))
    loss = dropped / (sent + dropped)
    print(f"jit netem loss {loss:.3f} of {sent + dropped} (chain mean {GE_MEAN_LOSS:.3f})")
    assert GE_MEAN_LOSS / 2 < loss < GE_MEAN_LOSS * 1.5, (loss, counts)
    for aqm in AQMS:
        summary = runs[("tcp_jit", aqm)]["summary"]
        print(f"tcp_jit ({aqm}): {summary}")
        assert summary["retransmits"] > 10, summary
        assert summary["latency"]["jit"]["loss_pct"] > 0, summary["latency"]
        assert summary["latency"]["lan"]["loss_pct"] == 0, summary["latency"]


def test_runs_parquet_has_the_probe_columns(runs: dict[tuple[str, str], dict[str, Any]]) -> None:
    for rec in runs.values():
        s, row = rec["summary"]["latency"], rec["_row"]
        keys = [(p, q) for p in ("lan", "jit") for q in ("p50", "p95", "p99")]
        got = {(p, q): row[f"ping_{q}_ms.{p}"] for p, q in keys}
        assert got == {(p, q): s[p][f"rtt_{q}_ms"] for p, q in keys}
        assert row["ping_loss_pct.jit"] == s["jit"]["loss_pct"]
        assert row["owd_down_p50_ms.lan"] == s["lan"]["down_p50_ms"]
