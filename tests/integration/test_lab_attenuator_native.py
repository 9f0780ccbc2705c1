"""Distance on a lab rig, through the runner: a virtual rig (no Ansible) run as a lab, from
inside its controller namespace with its rendered inventory plus `mprig_attenuators` (a
stand-in attenuator on the Wi-Fi path). The run's record shows the channel model's dB set
and read back, and no netem on the attenuated path (tc only on the cellular router). The
host has no sch_netem, so tbf stands in on the cellular path (MPRIG_BENCH_TBF_FOR_NETEM=1).
The campaign walks the Wi-Fi path from 20 to 40 m: the runner steps the attenuator through
the channel model's dB (mprig/run/labwalk.py), with no timed agent or tc on its router."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mprig.rig import virtual
from mprig.rig.attenuator import attenuation_for_distance
from mprig.run import bundle, labwalk
from mprig.run.impair import STANDIN_ENV
from mprig.stack import cc_allowed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")

RIG = "h17lab"
CAMPAIGN = """\
name: h17lab
paths:
  - {name: wifi, kind: wifi, rate_mbit: 54, distance_m: 20}
  - {name: cell, kind: cellular, rate_mbit: 4, delay_ms: 40}
variants:
  - {name: mptcp, protocol: mptcp}
traffic: {tool: iperf3, duration_s: 4}
timeline:
  - {at_s: 0.5, path: wifi, action: walk, to_m: 40, over_s: 2.5}
"""
ATTENUATORS = "\nmprig_attenuators:\n  wifi: {driver: stand-in, physical_m: 1.0}\n"


def mprig(*args: str) -> list[str]:
    return [sys.executable, "-m", "mprig.cli", *args]


def test_the_runner_drives_the_attenuator_and_adds_no_netem_to_the_radio(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(CAMPAIGN)
    t0 = time.monotonic()
    up = subprocess.run(mprig("rig", "up", "--rig", RIG, "--campaign", str(spec), "--no-provision"),
                        capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        inventory = tmp_path / "inventory"
        shutil.copytree(virtual.STATE_ROOT / RIG / "inventory", inventory)
        with (inventory / "group_vars" / "all.yml").open("a") as f:
            f.write(ATTENUATORS)
        # A lab's hosts are machines of their own, each setting its default CC in its own init
        # namespace; here they are namespaces of this machine, which may only select a CC the
        # machine-wide allowed list names (a kernel allows reno and its default, bbr on some
        # hosts): allowed for the run as `mprig run` does on the virtual rig.
        with cc_allowed.allow(["cubic"]):
            run = subprocess.run(
                ["ip", "netns", "exec", f"mprig-{RIG}-ctl",
                 *mprig("run", str(spec), "--inventory", str(inventory), "--results",
                        str(tmp_path), "--quiet")],
                capture_output=True, text=True, timeout=300, check=False,
                env={**os.environ, STANDIN_ENV: "1"},
            )  # fmt: skip
        assert run.returncode == 0, run.stderr
    finally:
        subprocess.run(mprig("rig", "down", "--rig", RIG), capture_output=True, timeout=120,
                       check=False)  # fmt: skip
    results = tmp_path / "h17lab"
    (run_id,) = [p["run_id"] for p in json.loads((results / "campaign.json").read_text())["plan"]]
    record = bundle.read_record(results / run_id)
    db = round(attenuation_for_distance(20, physical_m=1.0), 3)
    assert (record["status"], record["rig_mode"], record["attenuation"]) == (
        "complete",
        "lab",
        {
            "wifi": {
                "attenuator": "stand-in wifi",
                "distance_m": 20.0,
                "physical_m": 1.0,
                "db": db,
                "applied_db": db,
                "read_db": db,
            }
        },
    )
    ran = [(c["host"], part) for c in record["commands"] for part in c.get("parts", [c["argv"]])]
    qdiscs = [host for host, argv in ran if argv[:3] == ["tc", "qdisc", "replace"]]
    assert qdiscs == ["cell", "cell"]  # one tc for both (a fused command lists its parts)
    on_ap = [argv for h, argv in ran if h == "ap" and argv[:1] in (["tc"], ["python3"])]
    assert on_ap == [["tc", "-s", "qdisc", "show"]] * 2  # snapshots only: no change, no agent
    walk = [json.loads(x) for x in (results / run_id / labwalk.LOG).read_text().splitlines()]
    steps = [e for e in walk if e["event"] == "change"]
    model = [(round(0.5 + 2.5 * (e["distance_m"] - 20) / 20, 6), e["db"]) for e in steps]
    assert [
        (e["t"], round(attenuation_for_distance(e["distance_m"], 1.0), 3)) for e in steps
    ] == model
    assert [(e["rc"], e["read_db"], e["tool"]) for e in steps] == [
        (0, e["db"], "attenuator") for e in steps
    ]
    assert (steps[-1]["t"], steps[-1]["distance_m"], len(steps)) == (3.0, 40.0, 7)
    tl = record["timeline"]
    assert (sorted(tl["started"]), tl["changes"], tl["failed"]) == (["attenuator"], 7, [])
    print(f"walk: {[(e['t'], e['db']) for e in steps]}, late_ms {tl['late_ms']}")
    assert virtual.leftovers(RIG) == []
    print(f"lab run over a virtual rig with a stand-in attenuator: {time.monotonic() - t0:.1f} s")
