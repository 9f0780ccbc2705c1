"""CPU headroom during a run's traffic, and the rig-limited verdict (mprig.run.headroom)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from mprig.run import headroom
from mprig.run.headroom import CpuTimes, Reading

# /proc/stat of a 2-CPU machine, verbatim (user nice system idle iowait irq softirq steal ...)
STAT = """cpu  4705 150 1120 16250 520 0 97 30 0 0
cpu0 2352 75 560 8125 260 0 48 15 0 0
cpu1 2353 75 560 8125 260 0 49 15 0 0
intr 114930548 113199788 3 0 5 263 0 4 [... lots more numbers ...]
ctxt 1990473
"""


def test_the_cpu_line_counts_idle_and_iowait_as_headroom() -> None:
    busy = 4705 + 150 + 1120 + 0 + 97 + 30
    assert headroom.parse_cpu_line(STAT) == CpuTimes(busy, busy + 16250 + 520, steal=30)
    assert headroom.parse_cpu_line("cpu0 1 2 3 4 5 6 7\n") is None


def test_busy_share_between_two_readings() -> None:
    assert headroom.busy_share(CpuTimes(100, 1000), CpuTimes(550, 1500)) == 0.9
    assert headroom.busy_share(CpuTimes(100, 1000), CpuTimes(100, 1000)) is None
    assert headroom.busy_share(None, CpuTimes(1, 2)) is None


def test_a_saturated_guest_or_host_marks_the_run_rig_limited_with_the_cause() -> None:
    before = Reading(CpuTimes(0, 0), CpuTimes(0, 0))
    guest_full = Reading(CpuTimes(970, 1000), CpuTimes(500, 1000))
    assert headroom.during(before, guest_full, in_vm=True) == {
        "rig_busy": 0.97,
        "host_busy": 0.5,
        "host_other_busy": None,
        "threshold": headroom.SATURATED,
        "contended_threshold": headroom.CONTENDED,
        "rig_limited": True,
        "cause": "guest CPU 97% busy during the traffic (host 50%, QEMU's emulation included)",
    }
    # QEMU keeps the host busy while the guest has headroom: recorded, not a verdict
    host_full = Reading(CpuTimes(400, 1000), CpuTimes(950, 1000))
    verdict = headroom.during(before, host_full, in_vm=True)
    assert (verdict["rig_limited"], verdict["host_busy"]) == (False, 0.95)
    idle = Reading(CpuTimes(300, 1000), CpuTimes(0, 0))
    assert headroom.during(Reading(CpuTimes(0, 0), None), idle, in_vm=False) == {
        "rig_busy": 0.3,
        "host_busy": 0.3,
        "host_other_busy": None,
        "threshold": headroom.SATURATED,
        "contended_threshold": headroom.CONTENDED,
        "rig_limited": False,
        "cause": "",
    }


def test_the_host_writer_shares_the_host_cpu_line_with_the_vm(tmp_path: Path) -> None:
    path = tmp_path / headroom.HOST_CPU_FILE
    with headroom.HostCpuWriter(path, every=0.05):
        first = headroom.read_host(tmp_path)
        deadline = time.monotonic() + 5
        while headroom.read_host(tmp_path) == first and time.monotonic() < deadline:
            time.sleep(0.05)
        later = headroom.read_host(tmp_path)
    assert first is not None and later is not None and later.total > first.total
    assert not path.exists()  # removed when the campaign VM is done


def test_other_work_on_the_host_marks_the_run_even_when_the_guest_idles() -> None:
    # host: 1000 ticks, 950 busy, of which the VM's processes used 500: 45 % other work
    before = Reading(CpuTimes(0, 0), CpuTimes(0, 0, vm=0))
    after = Reading(CpuTimes(400, 1000), CpuTimes(950, 1000, vm=500))
    verdict = headroom.during(before, after, in_vm=True)
    assert (verdict["host_other_busy"], verdict["rig_limited"], verdict["cause"]) == (
        0.45,
        True,
        "other work took 45% of the host's CPUs from the VM",
    )
    quiet = Reading(CpuTimes(400, 1000), CpuTimes(600, 1000, vm=550))
    assert headroom.during(before, quiet, in_vm=True)["rig_limited"] is False


def test_the_vm_line_and_the_process_group_ticks() -> None:
    text = "cpu  10 0 10 80 0 0 0 0 0 0\nvm 7\n"
    assert headroom.parse_cpu_line(text) == CpuTimes(20, 100, vm=7)
    busy = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<3: pass"],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 3
        while headroom.group_ticks(busy.pid) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert headroom.group_ticks(busy.pid) > 0  # its own group: pgid == pid
        assert headroom.group_ticks(2**22 + 7) == 0  # no such group
    finally:
        busy.kill()
        busy.wait()
