"""IPv6 paths on a real virtual rig, natively (prefix v6; tbf stands in for netem, which this
host lacks: MPRIG_BENCH_TBF_FOR_NETEM=1).

experiments/ipv6.yaml as shipped (Wi-Fi over IPv6 at 20 Mbit/s, cellular over IPv4 at 10):
its MPTCP run must hold one connection with an IPv6 subflow (the initial one, to fd00::1)
and an IPv4 subflow (the join to the server's announced 10.0.0.1), each carrying data in
the client's capture, and read back the IPv6 endpoint; its TCP runs each stay on their
family. Then an IPv6-only campaign (two IPv6 paths) whose MPTCP run uses both, with no
IPv4 data packet in the capture. About 60 s for the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collectors.analyze import analyze_pcap
from mprig.rig import virtual
from mprig.run.impair import STANDIN_ENV

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")

MIXED = Path(__file__).parents[2] / "experiments" / "ipv6.yaml"
V6_ONLY = """\
name: v6only
paths:
  - {name: wifi, kind: wifi, family: ipv6, rate_mbit: 10, delay_ms: 5}
  - {name: eth, kind: wired, family: ipv6, rate_mbit: 10, delay_ms: 5}
variants:
  - {name: mptcp}
traffic: {duration_s: 4}
"""
MIN_PACKETS = 500  # a subflow "carries data": 5 s at 10-20 Mbit/s is thousands of packets


def mprig(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, STANDIN_ENV: "1"}
    argv = [sys.executable, "-m", "mprig.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)  # fmt: skip


def run_campaign(spec: Path, rig: str, results: Path) -> Path:
    """Run `spec` on rig `rig`; its results directory (the rig is gone afterwards)."""
    p = mprig("run", str(spec), "--no-vm", "--rig", rig, "--results", str(results), "--quiet",
              timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert virtual.leftovers(rig) == []
    name = spec.read_text().split("name:", 1)[1].split()[0]
    return results / name


def run_dir(campaign: Path, variant: str) -> Path:
    (found,) = campaign.glob(f"{variant}-r1-*")
    return found


def data_subflows(run: Path) -> list[tuple[str, int]]:
    """(family, data packets) of every subflow of the client capture's busiest connection."""
    conns = analyze_pcap(run / "client.pcap").connections
    busiest: Any = max(conns, key=lambda c: c.summary()["packets"])
    return [
        ("ipv6" if sf["name"].startswith("[") else "ipv4", int(sf["packets"]))
        for sf in busiest.summary()["subflows"]
    ]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_campaign(MIXED, "v6m", tmp_path_factory.mktemp("v6m"))


def test_one_mptcp_connection_has_subflows_of_both_families(mixed: Path) -> None:
    got = data_subflows(run_dir(mixed, "mptcp"))
    assert sorted(f for f, _ in got) == ["ipv4", "ipv6"], got
    assert all(n > MIN_PACKETS for _, n in got), got


def test_the_run_reads_back_the_ipv6_endpoint_and_the_announcement(mixed: Path) -> None:
    settings = json.loads((run_dir(mixed, "mptcp") / "run.json").read_text())["settings"]
    assert (settings["client"]["endpoints"], settings["server"]["endpoints"]) == (
        ["10.2.1.2 id 2 subflow fullmesh dev wwan0", "fd00:1:1::2 id 1 subflow dev wlan0"],
        ["10.0.0.1 id 1 signal"],
    )


def full_sized(pcap: Path, family: str) -> int:
    """TCP packets of at least 1000 bytes of one family (`ip` or `ip6`) in a capture."""
    out = subprocess.run(["tcpdump", "-nr", str(pcap), f"{family} and tcp and greater 1000"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return len(out.splitlines())


def test_tcp_runs_stay_on_their_paths_family(mixed: Path) -> None:
    v6, v4 = (run_dir(mixed, v) / "client.pcap" for v in ("tcp_v6", "tcp_v4"))
    got = {p.parent.name[:6]: (full_sized(p, "ip6"), full_sized(p, "ip")) for p in (v6, v4)}
    assert (got["tcp_v6"][1], got["tcp_v4"][0]) == (0, 0), got
    assert min(got["tcp_v6"][0], got["tcp_v4"][1]) > MIN_PACKETS, got


def test_an_ipv6_only_campaign_uses_both_paths(tmp_path: Path) -> None:
    spec = tmp_path / "v6only.yaml"
    spec.write_text(V6_ONLY)
    run = run_dir(run_campaign(spec, "v6o", tmp_path), "mptcp")
    got = data_subflows(run)
    assert [f for f, _ in got] == ["ipv6", "ipv6"], got
    assert all(n > MIN_PACKETS for _, n in got), got
    assert full_sized(run / "client.pcap", "ip") == 0
