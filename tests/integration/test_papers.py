"""The papers' quick profiles on the virtual rig, through the real runner and collectors
(issue 6, part 5): seed 000 Table I (MPTCP's gain over TCP on the best path by delay
difference) and seed 004 Fig. 4 (MPTCP throughput by receive buffer), in the shared VM
(sharedvm.py)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from quiet import quiet
from sharedvm import SHARED
from vmcampaign import rig_up

from reports import paperplans, reproduce
from reports.results import Results, load

pytestmark = [pytest.mark.vm, pytest.mark.shared_vm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RIG = "h8papers"
CAMPAIGNS = ("000-table1-quick", "004-fig4-quick")
# The variants the assertions below read (all of them where a campaign is not listed): the
# NS-3 column's D-SACK pair of Table I would add 18 runs, about 6 minutes of emulation,
# and exercise nothing new.
VARIANTS = {"000-table1-quick": ("mptcp", "tcp_best")}


def campaign_file(name: str, out: Path) -> Path:
    """The quick profile's file, or a copy of it trimmed to VARIANTS[name]."""
    path = ROOT / "experiments" / "papers" / f"{name}.yaml"
    if name not in VARIANTS:
        return path
    doc = yaml.safe_load(path.read_text())
    doc["variants"] = [v for v in doc["variants"] if v["name"] in VARIANTS[name]]
    trimmed = out / f"{name}.yaml"
    trimmed.write_text(yaml.safe_dump(doc, sort_keys=False))
    return trimmed


def _mprig(*args: str) -> list[str]:
    return [sys.executable, "-m", "mprig.cli", *args]


@pytest.fixture(scope="module")
def results() -> Iterator[dict[str, Results]]:
    out = SHARED.workdir("h8-papers-")
    try:
        vm = SHARED.get()
        for name in CAMPAIGNS:
            spec = campaign_file(name, out)
            argv = _mprig("run", str(spec), "--no-vm", "--quiet", "--rig", RIG)
            argv += ["--results", str(out)]
            rig_up(vm, spec, RIG)  # before the quiet section: not a measurement
            with quiet(f"{name} campaign"):  # measurements in the guest: the others wait
                done = vm.run(argv, timeout=1200)
            assert done.returncode in (0, 1), done.stderr[-2000:]
        loaded = {}
        for name in CAMPAIGNS:
            collect = subprocess.run(_mprig("collect", "--quiet", str(out / name)), check=False)
            assert collect.returncode == 0
            loaded[name] = load(out / name)
        yield loaded
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _throughput(r: Results, axis: str) -> dict[tuple[str, float], float]:
    """Mean throughput (Mbit/s, as the report computes it) by (variant, axis value)."""
    done = r.complete.copy()
    column = next(c for c in r.axes if c.endswith(axis))
    done["mbit"] = reproduce.throughput_bps(done) / 1e6
    means = done.groupby(["variant", column])["mbit"].mean()
    return {(str(v), float(x)): float(m) for (v, x), m in means.items()}


def test_every_run_completed(results: dict[str, Results]) -> None:
    counts = {n: (len(r.complete), len(r.runs)) for n, r in results.items()}
    assert counts == {"000-table1-quick": (18, 18), "004-fig4-quick": (12, 12)}


def test_table1_gain_is_60_pct_at_0_ms_and_falls_with_the_delay_difference(
    results: dict[str, Results],
) -> None:
    tput = _throughput(results["000-table1-quick"], "delay_ms")
    gains = [100 * (tput[("mptcp", d)] / tput[("tcp_best", d)] - 1) for d in (10.0, 110.0, 510.0)]
    assert gains[0] >= 60.0, gains
    assert gains[0] > gains[1] > gains[2], gains


def test_fig4_mptcp_grows_with_the_receive_buffer_and_the_report_says_how_it_compares(
    results: dict[str, Results],
) -> None:
    r = results["004-fig4-quick"]
    tput = _throughput(r, "rmem")
    mptcp = [tput[("mptcp", b)] for b in (50000.0, 1000000.0)]
    assert mptcp[-1] > mptcp[0] and not any(math.isnan(x) for x in mptcp), mptcp
    comp = paperplans.PAPERS["004"].comparisons[0]
    findings = reproduce.finding_lines(reproduce.comparison_rows(r, comp), comp)
    small = f"{tput[('mptcp', 50000.0)]:.3g} Mbit/s against {tput[('tcp_wifi', 50000.0)]:.3g}"
    assert any(small in line for line in findings), findings
