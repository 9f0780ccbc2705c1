"""`mprig run` end to end on the virtual rig, inside one VM for the whole module (this kernel
has no sch_netem): a 3 s campaign into verified bundles, MPTCP over both paths, nothing
left behind."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mprig import bundle, vm

pytestmark = [pytest.mark.vm, pytest.mark.slow]

CAMPAIGN = """\
name: {name}
paths:
  - {{name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10, limit_pkts: 100}}
  - {{name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40, limit_pkts: 150}}
variants:
  - {{name: mptcp, protocol: mptcp}}
  - {{name: tcp_wifi, protocol: tcp, path: wifi}}
traffic: {{tool: iperf3, direction: download, duration_s: 3}}
capture: {{snaplen: 128}}
repetitions: {reps}
"""
MPRIG = [sys.executable, "-m", "mprig.cli"]
Session = tuple[vm.VmSession, Path]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    shared = tmp_path_factory.mktemp("h3run")
    with vm.VmSession(rwdirs=[shared]) as s:
        yield s, shared


def in_vm(s: Session, *argv: str, timeout: float = 300) -> vm.VmResult:
    return s[0].run(list(argv), timeout=timeout)


def write_campaign(s: Session, name: str, reps: int) -> Path:
    spec = s[1] / f"{name}.yaml"
    spec.write_text(CAMPAIGN.format(name=name, reps=reps))
    return spec


def run_argv(s: Session, spec: Path, rig: str) -> list[str]:
    return [*MPRIG, "run", str(spec), "--no-vm", "--rig", rig, "--results", str(s[1]),
            "--log-json"]  # fmt: skip


def leftovers(s: Session, rig: str) -> list[str]:
    code = (
        f"from mprig.rig import virtual; import json; print(json.dumps(virtual.leftovers({rig!r})))"
    )
    r = in_vm(s, sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout))


def netem_sent(tc_text: str) -> dict[str, int]:
    """Bytes each netem qdisc sent, by device, from `tc -s qdisc show`."""
    pattern = r"qdisc netem \S+ dev (\S+) [^\n]*\n Sent (\d+) bytes"
    return {dev: int(n) for dev, n in re.findall(pattern, tc_text)}


def events(results: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (results / "events.jsonl").read_text().splitlines()]


def test_campaign_end_to_end(session: Session) -> None:
    spec = write_campaign(session, "h3e2e", reps=1)
    r = in_vm(session, *run_argv(session, spec, "h3e"))
    assert r.returncode == 0, r.stderr[-3000:]
    results = session[1] / "h3e2e"
    plan = json.loads((results / "campaign.json").read_text())["plan"]
    assert [p["variant"]["name"] for p in plan] == ["mptcp", "tcp_wifi"]
    for p in plan:
        d = results / p["run_id"]
        assert bundle.verify(d) == bundle.Verdict(True, "complete", "complete")
        record = bundle.read_record(d)
        assert (record["status"], record["rig_mode"], record["attempts"]) == (
            "complete", "virtual-vm", 1)  # fmt: skip
        assert sorted(record["artifacts"]) == [
            "client.pcap", "iperf3-client.json", "iperf3-server.json",
            "nstat-client-after.txt", "nstat-client-before.txt", "nstat-server-after.txt",
            "nstat-server-before.txt", "server.pcap", "ss-server.txt", "tc-ap-after.txt",
            "tc-ap-before.txt", "tc-cell-after.txt", "tc-cell-before.txt",
        ]  # fmt: skip
        assert (d / "client.pcap").stat().st_size > 100_000
        assert (d / "server.pcap").stat().st_size > 100_000
        client = json.loads((d / "iperf3-client.json").read_text())
        assert client["end"]["sum_received"]["bytes"] > 1_000_000
        assert (d / "ss-server.txt").read_text().startswith("# ")
    mptcp, tcp = (bundle.read_record(results / p["run_id"]) for p in plan)
    mptcp_dir, tcp_dir = (results / p["run_id"] for p in plan)
    # MPTCP carried data over both paths: both routers' download qdiscs sent megabytes.
    wifi = netem_sent((mptcp_dir / "tc-ap-after.txt").read_text())
    cell = netem_sent((mptcp_dir / "tc-cell-after.txt").read_text())
    assert wifi["lan0"] > 2_000_000 and cell["lan0"] > 1_000_000, (wifi, cell)
    # Single-path TCP over wifi left the cellular path idle.
    assert netem_sent((tcp_dir / "tc-cell-after.txt").read_text())["lan0"] < 50_000
    assert mptcp["summary"]["throughput_bps"] > 1.2 * tcp["summary"]["throughput_bps"]
    kinds = [e["event"] for e in events(results)]
    assert kinds == ["campaign_start", "run_start", "run_end", "run_start", "run_end",
                     "campaign_end"]  # fmt: skip
    status = in_vm(session, *MPRIG, "status", str(results), "--json")
    assert status.returncode == 0
    assert [row["status"] for row in json.loads(status.stdout)] == ["complete", "complete"]
    assert leftovers(session, "h3e") == []
