"""Many rigs at once, natively: a 4-run campaign as two shards on two virtual rigs (sharda,
shardb) at the same time, each into its own results root, then `mprig merge` and `mprig
status` on the merged directory. The host has no sch_netem, so tbf stands in
(MPRIG_BENCH_TBF_FOR_NETEM=1): paths keep their rates but have no delay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors.analyze import analyze_pcap
from mprig.rig import virtual
from mprig.run import bundle, capture
from mprig.run.impair import STANDIN_ENV

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")

# Each shard brings its rig up (namespaces, sshd, playbooks/rig.yml), runs 2 x 2 s of
# traffic and tears the rig down: about a minute on an idle 2-core host, more when the
# cores are busy, so the bound is loose and the time is printed, not asserted.
LIMIT_S = 300

CAMPAIGN = """\
name: h17shards
paths:
  - {name: wifi, kind: wifi, rate_mbit: 8, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 4, delay_ms: 40}
variants:
  - {name: mptcp, protocol: mptcp}
  - {name: tcp_wifi, protocol: tcp, path: wifi}
repetitions: 2
traffic: {tool: iperf3, duration_s: 2}
"""


def mprig(*args: str) -> list[str]:
    return [sys.executable, "-m", "mprig.cli", *args]


def captures(run: Path, *, mptcp: bool) -> None:
    """tcpdump ran on each data interface, never on any; the receiver's merged capture
    holds every subflow of the connection."""
    tcpdumps = [c["argv"] for c in bundle.read_record(run)["commands"] if c["argv"][0] == "tcpdump"]
    assert [argv[2] for argv in tcpdumps] == ["wlan0", "wwan0", "p1", "p2"]
    assert capture.pcapng_interfaces(run / "client.pcap") == [("wlan0", 1), ("wwan0", 1)]
    assert capture.pcapng_interfaces(run / "server.pcap") == [("p1", 1), ("p2", 1)]
    if mptcp:
        conns = [c.summary() for c in analyze_pcap(run / "client.pcap").connections]
        data = max(conns, key=lambda c: c["bytes"])  # not iperf3's control connection
        assert [sf["bytes"] > 0 for sf in data["subflows"]] == [True, True]


def test_two_shards_on_two_rigs_merge_into_a_complete_campaign(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    env = {**os.environ, STANDIN_ENV: "1"}
    t0 = time.monotonic()
    shards = {
        rig: subprocess.Popen(
            mprig(
                "run",
                str(spec),
                "--no-vm",
                "--rig",
                rig,
                "--shard",
                f"{i}/2",
                "--results",
                str(tmp_path / rig),
                "--quiet",
            ),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, rig in enumerate(("sharda", "shardb"), start=1)
    }
    try:
        outs = {rig: p.communicate(timeout=LIMIT_S) for rig, p in shards.items()}
    finally:
        for rig, p in shards.items():
            if p.poll() is None:  # SIGTERM: the runner tears its rig down and exits ...
                p.terminate()
                p.wait(timeout=60)
            if virtual.leftovers(rig):  # ... except while the rig comes up
                virtual.down(rig)
    assert {rig: p.returncode for rig, p in shards.items()} == {"sharda": 0, "shardb": 0}, outs
    dirs = [tmp_path / rig / "h17shards" for rig in shards]
    docs = [json.loads((d / "campaign.json").read_text()) for d in dirs]
    plan = [p["run_id"] for p in docs[0]["plan"]]
    mine = [doc["shard"]["run_ids"] for doc in docs]
    assert (len(plan), sorted(mine[0] + mine[1]), [len(m) for m in mine]) == (
        4,
        sorted(plan),
        [2, 2],
    )
    for d, ids, rig in zip(dirs, mine, shards, strict=True):
        for run_id in ids:
            record = bundle.read_record(d / run_id)
            assert (record["status"], record["run_id"]) == ("complete", run_id)
            assert f"/tmp/mprig-{rig}/{run_id}/" in json.dumps(record["commands"])
            captures(d / run_id, mptcp=run_id.startswith("mptcp-"))

    out = tmp_path / "merged" / "h17shards"
    merged = subprocess.run(mprig("merge", str(out), *map(str, dirs)),
                            capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert (merged.returncode, merged.stdout) == (
        0,
        f"merged 4 of 4 planned runs from 2 directories into {out}\n",
    ), merged.stderr
    status = subprocess.run(mprig("status", str(out), "--json"),
                            capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    rows = json.loads(status.stdout)
    assert (status.returncode, [r["run_id"] for r in rows], {r["status"] for r in rows}) == (
        0,
        plan,
        {"complete"},
    )
    assert (virtual.leftovers("sharda"), virtual.leftovers("shardb")) == ([], [])
    print(f"two shards and the merge: {time.monotonic() - t0:.1f} s")
