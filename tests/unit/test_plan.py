"""Plan expansion: counts, order, ids, seeds, shuffle; and `mprig plan` output."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path as FsPath

import pytest

from mprig.campaign.plan import Run, expand, run_count, run_json, run_seed
from mprig.campaign.spec import load_campaign, parse_campaign
from mprig.cli.main import main
from mprig.rig.layout import SERVER_ADDR, layout
from mprig.run import commands

REPO = FsPath(__file__).parents[2]
SMOKE = REPO / "experiments" / "smoke.yaml"

BASE = """\
name: t
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants:
  - {name: mptcp}
  - {name: tcp_cell, protocol: tcp, path: cell}
repetitions: 2
"""
SWEEP = """\
sweep:
  axes:
    paths.wifi.delay_ms: {start: 10, stop: 30, step: 10}
    variants.cc: [cubic, reno]
"""


def summary(runs: list[Run]) -> list[tuple[int, int, str, tuple[object, ...]]]:
    return [(r.index, r.repetition, r.variant.name, tuple(r.point.values())) for r in runs]


def test_smoke_plan_order() -> None:
    runs = expand(load_campaign(SMOKE))
    assert summary(runs) == [
        (0, 1, "mptcp", ()),
        (1, 1, "tcp_wifi", ()),
        (2, 1, "tcp_cell", ()),
        (3, 2, "mptcp", ()),
        (4, 2, "tcp_wifi", ()),
        (5, 2, "tcp_cell", ()),
    ]


def test_cartesian_sweep_order_and_values() -> None:
    runs = expand(parse_campaign(BASE + SWEEP, "t.yaml"))
    assert len(runs) == run_count(parse_campaign(BASE + SWEEP, "t.yaml")) == 24
    points = [(d, cc) for d in (10, 20, 30) for cc in ("cubic", "reno")]
    assert summary(runs) == [
        (i, rep, variant, point)
        for i, (rep, point, variant) in enumerate(
            (rep, point, variant)
            for rep in (1, 2)
            for point in points
            for variant in ("mptcp", "tcp_cell")
        )
    ]
    last = runs[-1]
    assert (last.paths[0].down.delay_ms, last.paths[0].up.delay_ms, last.variant.cc) == (
        30,
        30,
        "reno",
    )


def test_zip_sweep() -> None:
    text = BASE.replace("repetitions: 2", "repetitions: 1") + (
        "sweep:\n  mode: zip\n  axes:\n    paths.wifi.rate_mbit: [5, 10]\n"
        "    paths.cell.rate_mbit: [50, 100]\n"
    )
    runs = expand(parse_campaign(text, "t.yaml"))
    assert [
        (r.variant.name, r.paths[0].down.rate_mbit, r.paths[1].down.rate_mbit) for r in runs
    ] == [
        ("mptcp", 5, 50),
        ("tcp_cell", 5, 50),
        ("mptcp", 10, 100),
        ("tcp_cell", 10, 100),
    ]


def test_tcp_runs_carry_every_path() -> None:
    runs = expand(parse_campaign(BASE, "t.yaml"))
    assert [p.name for p in runs[1].paths] == ["wifi", "cell"]
    assert (runs[1].variant.protocol, runs[1].variant.path) == ("tcp", "cell")


def test_run_ids_are_readable_unique_and_safe() -> None:
    runs = expand(parse_campaign(BASE + SWEEP, "t.yaml"))
    ids = [r.run_id for r in runs]
    assert len(set(ids)) == len(ids)
    assert ids[0].rsplit("-", 1)[0] == "mptcp-wifi.delay_ms_10-cc_cubic-r1"
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*(-[A-Za-z0-9._]+)*-r\d+-[0-9a-f]{8}", i) for i in ids)


def test_run_ids_and_seeds_are_stable_across_processes() -> None:
    code = (
        "from mprig.campaign.plan import expand; from mprig.campaign.spec import load_campaign; "
        f"runs = expand(load_campaign({str(SMOKE)!r})); "
        "print(' '.join(f'{r.run_id}:{r.seed}' for r in runs))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    assert out == [f"{r.run_id}:{r.seed}" for r in expand(load_campaign(SMOKE))]


def test_run_id_changes_with_parameters() -> None:
    a = expand(parse_campaign(BASE, "t.yaml"))
    b = expand(parse_campaign(BASE.replace("delay_ms: 40", "delay_ms: 41"), "t.yaml"))
    assert [(x.run_id == y.run_id) for x, y in zip(a, b, strict=True)] == [False] * 4


def test_seeds_derive_from_campaign_seed_and_run_id() -> None:
    runs = expand(parse_campaign(BASE + "seed: 7\n", "t.yaml"))
    assert [r.seed for r in runs] == [run_seed(7, r.run_id) for r in runs]
    assert len({r.seed for r in runs}) == 4


@pytest.mark.parametrize("seed", [0, 1])
def test_shuffle_is_seeded(seed: int) -> None:
    text = BASE + SWEEP + f"order: shuffle\nseed: {seed}\n"
    first, again = expand(parse_campaign(text, "t.yaml")), expand(parse_campaign(text, "t.yaml"))
    sequential = expand(parse_campaign(BASE + SWEEP + f"seed: {seed}\n", "t.yaml"))
    assert [r.run_id for r in first] == [r.run_id for r in again]
    assert [r.run_id for r in first] != [r.run_id for r in sequential]
    assert sorted(r.run_id for r in first) == sorted(r.run_id for r in sequential)
    assert [r.index for r in first] == list(range(24))


def test_shuffle_differs_between_seeds() -> None:
    orders = [
        [
            r.run_id
            for r in expand(parse_campaign(BASE + SWEEP + f"order: shuffle\nseed: {s}\n", "t.yaml"))
        ]
        for s in (0, 1)
    ]
    assert orders[0] != orders[1]


def test_plan_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SMOKE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    runs = expand(load_campaign(SMOKE))
    assert [line.split() for line in lines] == [
        ["index", "run_id", "rep", "seed", "variant"],
        *[[str(r.index), r.run_id, str(r.repetition), str(r.seed), r.variant.name] for r in runs],
        ["6", "runs"],
    ]


def test_plan_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--json", str(SMOKE)]) == 0
    assert json.loads(capsys.readouterr().out) == [
        run_json(r) for r in expand(load_campaign(SMOKE))
    ]


def test_plan_of_invalid_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    bad = REPO / "tests" / "unit" / "campaigns" / "zero_rate.yaml"
    assert main(["plan", str(bad)]) == 2
    assert capsys.readouterr() == (
        "",
        f"mprig: error: {bad}:5: paths.wifi.rate_mbit: must be greater than 0, got 0"
        " (allowed: > 0 and <= 100000: 100 Gbit/s is beyond any link a rig or netem carries)\n",
    )


def test_plan_commands_on_the_virtual_rig(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--commands", str(SMOKE)]) == 0
    runs = expand(load_campaign(SMOKE))
    links = layout(runs[0].paths)
    expected = []
    for r in runs:
        expected.append(f"# run {r.index} {r.run_id}")
        cmds = commands.for_run(r, links, server_addr=SERVER_ADDR, rig="main")
        expected += [f"{host}: {shlex.join(argv)}" for host, argv in cmds]
    assert capsys.readouterr().out.splitlines() == expected
    assert "ap: tc qdisc replace dev lan0 root netem delay 10ms rate 20mbit limit" in "\n".join(
        expected
    )


LAB_INVENTORY = """\
all:
  hosts:
    client: {ansible_host: 192.0.2.10}
    server: {ansible_host: 192.0.2.11}
    gw1: {ansible_host: 192.0.2.12}
  vars:
    mprig_server_addr: 198.51.100.1
    mprig_paths:
      - {name: wifi, kind: wifi, client_if: wlp2s0, client_addr: 192.168.1.2, router: gw1,
         router_client_if: eth1, router_server_if: eth2}
      - {name: cell, kind: cellular, client_if: wwan0, client_addr: 10.64.0.2, router: gw1,
         router_client_if: eth3, router_server_if: eth4}
"""


def test_plan_commands_on_a_lab_inventory(
    tmp_path: FsPath, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hosts.yml").write_text(LAB_INVENTORY)
    campaign = tmp_path / "lab.yaml"
    campaign.write_text(SMOKE.read_text())
    monkeypatch.setenv("PATH", f"{FsPath(sys.executable).parent}:{os.environ['PATH']}")
    inventory = str(tmp_path / "hosts.yml")  # outside inventory/: given on the command line
    assert (
        main(["plan", "--commands", "--rig", "lab1", "--inventory", inventory, str(campaign)]) == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"# run 0 {expand(load_campaign(campaign))[0].run_id}"
    assert "gw1: tc qdisc del dev eth3 root" in out
    assert any(
        line.startswith("client: mptcpize run iperf3 -c 198.51.100.1 -B 192.168.1.2")
        for line in out
    )
