"""The lab path end to end on a VM lab (issue 17, `make test-lab`).

One QEMU guest boots the kernel `make kernel-vm` built with the upstream patch series; inside
it, in one VmSession:

a) the guest runs the built release and has patch 0002's net.mptcp.proactive_sched;
b) the lab comes up (mprig.rig.vmlab): hosts client, ap, cell, server are namespaces with
   their own sshd and checked host keys, the Wi-Fi hop two mac80211_hwsim radios, and its
   generated inventory gets what a lab engineer adds (kernel expectations, the attenuator);
c) `ansible-playbook playbooks/site.yml -i <that inventory>` provisions it as a lab: hostapd
   WPA2 on ap, wpa_supplicant on client, the kernel role verifying the release and sysctls;
d) experiments/smoke.yaml, shortened to one 4 s repetition and given a distance on the Wi-Fi
   path, runs with `mprig run --inventory` as a LAB rig: preflight probe, the `txpower`
   driver on the AP's hwsim radio for the distance (real `iw` calls, read back; hwsim does
   not attenuate the signal, so it stands in for an RF attenuator), no netem on the radio;
e) the campaign's verified teardown (sysctls, qdiscs, BPF CCs back to the baseline), then
   the lab is torn down;
f) a paper campaign on a second lab built for it: paper 002's case A (experiments/papers/
   002-case-a-quick.yaml, one repetition: four wired paths behind four routers, Reno, 200 KB
   receive buffer; original MPTCP and RBPM). site.yml provisions it, `mprig run --inventory`
   runs it as a lab rig (netem on the routers, the RBPM controller on the client over SSH).
   The only paper campaign without a BPF congestion control: make kernel-vm's kernel has no
   BTF (vm-small.config), so LIA, CWA and the reordering CCs cannot load on it.

A missing bzImage is a failure naming `make kernel-vm`, not a skip. Marked long; neither
`make test` nor `make test-long` runs it. Under software emulation: see README (make test-lab).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from collectors.analyze import analyze_pcap
from mprig.rig import virtual, vmprobe
from mprig.rig.attenuator import attenuation_for_distance
from mprig.rig.vmlab import MAX_DBM, REQUIRED_SYSCTLS
from mprig.rig.vmsession import VmSession

pytestmark = [pytest.mark.long, pytest.mark.vm, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
KERNEL_VM = Path(os.environ.get("MPRIG_KERNEL_VM", "/var/cache/mprig/kernel-vm"))
RIG = "h17vmlab"
DISTANCE_M = 3.0  # the Wi-Fi path's distance: PL(3 m) - PL(1 m) of the channel model
WLAN0, WWAN0 = "10.1.1.2", "10.2.1.2"  # the client's addresses on the two paths
PY = sys.executable


def built_kernel() -> tuple[Path, str]:
    """The bzImage and the release `make kernel-vm` recorded next to it."""
    image, release = KERNEL_VM / "bzImage", KERNEL_VM / "release"
    if not (image.is_file() and release.is_file()):
        pytest.fail(f"no {image}: run make kernel-vm (kernel-configs/README.md)")
    return image, release.read_text().strip()


def smoke_copy() -> str:
    """experiments/smoke.yaml, one 4 s repetition, the Wi-Fi path at DISTANCE_M (its rate the
    802.11g PHY mode, as a distance requires)."""
    spec = yaml.safe_load((REPO / "experiments" / "smoke.yaml").read_text())
    spec.update(name="labsmoke", repetitions=1)
    spec["traffic"]["duration_s"] = 4
    wifi = next(p for p in spec["paths"] if p["kind"] == "wifi")
    wifi.update(distance_m=DISTANCE_M, rate_mbit=54)
    return str(yaml.safe_dump(spec, sort_keys=False))


def paper_copy() -> str:
    """experiments/papers/002-case-a-quick.yaml, one repetition."""
    spec = yaml.safe_load((REPO / "experiments" / "papers" / "002-case-a-quick.yaml").read_text())
    spec.update(name="lab002a", repetitions=1)
    return str(yaml.safe_dump(spec, sort_keys=False))


def lab_campaign(
    session: VmSession, share: Path, name: str, argv_up: list[str], timeout: float
) -> dict[str, Any]:
    """Up a lab for campaign share/NAME.yaml, run it as a lab rig, take the lab down."""
    spec, inventory = share / f"{name}.yaml", share / f"{name}-inventory"
    out: dict[str, Any] = {}
    up = [PY, "-m", "mprig.rig.vmlab", "up", "--rig", RIG, "--campaign", str(spec)]
    out["up"] = session.run([*up, "--inventory", str(inventory), *argv_up], timeout=2400)
    if out["up"].returncode == 0:
        run = ["ip", "netns", "exec", f"mprig-{RIG}-ctl", PY, "-m", "mprig.cli", "run", str(spec)]
        run += ["--inventory", str(inventory), "--results", str(share / "results"), "--quiet"]
        out["run"] = session.run(run, timeout=timeout)
    out["down"] = session.run([PY, "-m", "mprig.rig.vmlab", "down", "--rig", RIG], timeout=300)
    return out


def guest_steps(session: VmSession, share: Path, release: str, sysctls: tuple[str, ...]) -> Any:
    """Run a) to e) in the guest; each step's VmResult by name (stops at the first failure
    of a step later steps need)."""
    spec, inventory = share / "labsmoke.yaml", share / "inventory"
    out: dict[str, Any] = {}
    probe = "uname -r; sysctl -n net.mptcp.proactive_sched"
    out["kernel"] = session.run(["sh", "-c", probe], timeout=60)
    up = [PY, "-m", "mprig.rig.vmlab", "up", "--rig", RIG, "--campaign", str(spec)]
    up += ["--inventory", str(inventory), "--release", release]
    up += [arg for s in sysctls for arg in ("--sysctl", s)]
    out["up"] = session.run(up, timeout=2400)
    log = f"{virtual.STATE_ROOT}/{RIG}/ansible/last-run.log"  # in the guest's own /run
    out["ansible_log"] = session.run(["cat", log], timeout=60)
    if out["up"].returncode == 0:
        run = [
            "ip",
            "netns",
            "exec",
            f"mprig-{RIG}-ctl",
            PY,
            "-m",
            "mprig.cli",
            "run",
            str(spec),
        ]
        run += ["--inventory", str(inventory), "--results", str(share / "results"), "--quiet"]
        out["run"] = session.run(run, timeout=1500)
        iw = ["ip", "netns", "exec", f"mprig-{RIG}-ap", "tc", "qdisc", "show", "dev", "lan0"]
        out["radio_qdisc"] = session.run(iw, timeout=60)
    out["down"] = session.run([PY, "-m", "mprig.rig.vmlab", "down", "--rig", RIG], timeout=300)
    kernel = ["--release", release, *[arg for s in sysctls for arg in ("--sysctl", s)]]
    paper = lab_campaign(session, share, "lab002a", kernel, timeout=1500)
    out.update({f"paper_{k}": v for k, v in paper.items()})
    out["netns"] = session.run(["ip", "netns", "list"], timeout=60)
    return out


def lab_session(image: Path, release: str, sysctls: tuple[str, ...]) -> Iterator[Any]:
    """Boot `image` once, run the steps, yield (steps, results dir, wall seconds)."""
    share = Path(tempfile.mkdtemp(prefix="labvm-", dir="/var/tmp"))  # the guest has its own /tmp
    (share / "labsmoke.yaml").write_text(smoke_copy())
    (share / "lab002a.yaml").write_text(paper_copy())
    t0 = time.monotonic()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(vmprobe.VM_KERNEL_ENV, str(image))
            # site.yml under emulation can starve the guest's heartbeat on a busy host
            mp.setenv("MPRIG_VM_STALE_AFTER", os.environ.get("MPRIG_VM_STALE_AFTER", "3600"))
            with VmSession(rwdirs=[share], memory="2G") as session:
                steps = guest_steps(session, share, release, sysctls)
        wall = time.monotonic() - t0
        print(f"\nVM lab: boot + lab + site.yml + smoke campaign + teardown: {wall:.0f} s")
        keep = Path(os.environ.get("MPRIG_LAB_KEEP", "/var/tmp/mprig-lab-last"))
        shutil.rmtree(keep, ignore_errors=True)  # the last run's share, for a look afterwards
        shutil.copytree(share, keep)
        (keep / "steps.json").write_text(json.dumps({k: asdict(v) for k, v in steps.items()}))
        yield steps, share / "results" / "labsmoke", wall
    finally:
        shutil.rmtree(share, ignore_errors=True)


@pytest.fixture(scope="module")
def lab() -> Iterator[Any]:
    image, release = built_kernel()
    yield from lab_session(image, release, REQUIRED_SYSCTLS)


def step(lab: Any, name: str) -> Any:
    steps = lab[0]
    if name not in steps:
        pytest.fail(f"step {name} did not run: up said {steps['up'].stderr[-3000:]}")
    return steps[name]


def records(lab: Any) -> dict[str, dict[str, Any]]:
    """variant -> run.json of the campaign's runs."""
    results: Path = lab[1]
    assert step(lab, "run").returncode == 0, step(lab, "run").stderr[-3000:]
    out = {}
    for run in json.loads((results / "campaign.json").read_text())["plan"]:
        record = json.loads((results / run["run_id"] / "run.json").read_text())
        out[record["variant"]["name"]] = record
    return out


def test_kernel_is_built() -> None:
    image, release = built_kernel()
    assert image.stat().st_size > 1 << 20 and release.endswith("-mprig-vm")


def test_a_guest_runs_the_built_release_with_the_proactive_scheduler_sysctl(lab: Any) -> None:
    _, release = built_kernel()
    assert step(lab, "kernel").stdout.split() == [release, "0"]


def test_site_yml_provisioned_every_lab_host_without_failure(lab: Any) -> None:
    up = step(lab, "up")
    assert up.returncode == 0, (up.stdout + up.stderr)[-3000:]
    recap = json.loads(up.stdout)["recap"]
    assert sorted(recap) == ["ap", "cell", "client", "server"]
    assert {h: (c["failed"], c["unreachable"]) for h, c in recap.items()} == dict.fromkeys(
        recap, (0, 0)
    )


def test_the_station_is_associated_with_the_hostapd_ap(lab: Any) -> None:
    link = json.loads(step(lab, "up").stdout)["link"]
    assert "Connected to" in link and "SSID: mprig-virtual" in link, link


def test_the_smoke_campaign_ran_as_a_lab_on_the_patched_kernel(lab: Any) -> None:
    _, release = built_kernel()
    runs = records(lab)
    assert sorted(runs) == ["mptcp", "tcp_cell", "tcp_wifi"]
    summary = {
        v: (r["status"], r["rig_mode"], r["hosts"]["client"]["kernel"]) for v, r in runs.items()
    }
    assert summary == dict.fromkeys(runs, ("complete", "lab", release))


def test_the_ap_radio_txpower_was_set_for_the_distance_and_read_back(lab: Any) -> None:
    db = attenuation_for_distance(DISTANCE_M, 1.0)
    applied = MAX_DBM - round(MAX_DBM - db)  # mac80211 takes whole dBm
    for variant, record in records(lab).items():
        assert record["attenuation"] == {
            "wifi": {
                "attenuator": "ap:lan0 txpower",
                "distance_m": DISTANCE_M,
                "physical_m": 1.0,
                "db": round(db, 3),
                "applied_db": float(applied),
                "read_db": float(applied),
            }
        }, variant


def test_no_netem_on_the_radio_path(lab: Any) -> None:
    for variant, record in records(lab).items():
        ran = [(c["host"], p) for c in record["commands"] for p in c.get("parts", [c["argv"]])]
        tc = {host for host, argv in ran if argv[:1] == ["tc"] and "netem" in argv}
        assert tc <= {"cell"}, (variant, tc)
    assert "netem" not in step(lab, "radio_qdisc").stdout


def test_mptcp_carried_data_over_wlan0_and_wwan0(lab: Any) -> None:
    bundle = lab[1] / records(lab)["mptcp"]["run_id"]
    data: dict[str, int] = {}
    for conn in analyze_pcap(bundle / "client.pcap").connections:
        for sf in conn.subflows:
            data[sf.dst] = data.get(sf.dst, 0) + sf.packets  # download: the client receives
    assert data.get(WLAN0, 0) > 200 and data.get(WWAN0, 0) > 200, data


def test_the_campaign_teardown_was_verified(lab: Any) -> None:
    records(lab)
    teardown = json.loads((lab[1] / "teardown.json").read_text())
    assert (teardown["verified"], teardown["problems"]) == (True, [])
    assert sorted(teardown["after"]) == ["ap", "cell", "client", "server"]


def test_paper_002_case_a_ran_on_its_own_lab(lab: Any) -> None:
    _, release = built_kernel()
    up = step(lab, "paper_up")
    assert up.returncode == 0, (up.stdout + up.stderr)[-3000:]
    recap = json.loads(up.stdout)["recap"]
    assert {h: (c["failed"], c["unreachable"]) for h, c in recap.items()} == dict.fromkeys(
        recap, (0, 0)
    )
    assert step(lab, "paper_run").returncode == 0, step(lab, "paper_run").stderr[-3000:]
    results = lab[1].parent / "lab002a"
    runs = {}
    for run in json.loads((results / "campaign.json").read_text())["plan"]:
        record = json.loads((results / run["run_id"] / "run.json").read_text())
        runs[record["variant"]["name"]] = (record, results / run["run_id"])
    summary = {v: (r["status"], r["rig_mode"], r["hosts"]["client"]["kernel"])
               for v, (r, _) in runs.items()}  # fmt: skip
    assert summary == {v: ("complete", "lab", release) for v in ("mptcp", "rbpm")}
    # the controller ran on the lab's client and stopped a subflow (the slow path's first)
    rbpm, bundle = runs["rbpm"]
    log = [json.loads(line) for line in (bundle / "rbpm.jsonl").read_text().splitlines()]
    stops = [r for r in log if r["event"] == "step" and r["decision"]["action"] == "backup"]
    slow = next(link["client_addr"] for link in rbpm["links"] if link["name"] == "p4")
    first = stops[0]["decision"]
    assert [f["addr"] for f in first["subflows"] if f["key"] == first["targets"][0]] == [slow]


def test_the_lab_is_gone_afterwards(lab: Any) -> None:
    assert step(lab, "down").returncode == 0, step(lab, "down").stderr
    assert step(lab, "paper_down").returncode == 0, step(lab, "paper_down").stderr
    assert f"mprig-{RIG}-" not in step(lab, "netns").stdout
