"""The rig's CPU headroom during a run's traffic, and whether the rig limited the run.

On a virtual rig every host is a namespace of one kernel, so that kernel's /proc/stat is
the rig's CPU: the machine's natively, the guest's in VM mode. In VM mode the host
machine matters too (QEMU's emulation threads): the `mprig run` outside the VM writes
the host's /proc/stat `cpu` line into a file of the shared results directory every half
second (HostCpuWriter), and the runner inside reads it at the start and the end of the
traffic. A run whose rig kernel (the guest in VM mode) was busy for SATURATED of the
traffic time or more measured the rig, not MPTCP: it is flagged `rig_limited` with the
cause. In VM mode the host's busy share is recorded beside it but not judged (QEMU keeps
the host busy while the guest still has headroom); what is judged is the share taken by
work other than the VM's own processes (CONTENDED or more): a starved vCPU thread shows in
no guest counter, its timers (netem's too) just fire late.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST_CPU_FILE = ".host-cpu"  # in the campaign's results directory (shared with the VM)
SATURATED = 0.9  # busy share of all CPUs over the traffic that marks a run rig-limited
# VM mode: share of the host's CPUs taken by work other than the VM's own processes over the
# traffic that marks a run rig-limited. A starved vCPU thread shows in no guest counter
# (netem's timers simply fire late), so other load on the host is measured directly.
CONTENDED = 0.2
PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time of all CPUs (clock ticks, as /proc/stat counts it)."""

    busy: int  # user, nice, system, irq, softirq, steal
    total: int  # busy + idle + iowait
    vm: int | None = None  # host only: CPU time of the VM's processes (QEMU, virtiofsd)
    steal: int = 0  # of busy: time the hypervisor ran something else (this kernel a guest)


def parse_cpu_line(text: str) -> CpuTimes | None:
    """The aggregate `cpu` line of /proc/stat (guest and guest_nice are already in user),
    and a `vm TICKS` line where HostCpuWriter wrote one."""
    times, vm = None, None
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == "cpu" and len(words) >= 8:
            user, nice, system, idle, iowait, irq, softirq = map(int, words[1:8])
            steal = int(words[8]) if len(words) > 8 else 0
            busy = user + nice + system + irq + softirq + steal
            times = CpuTimes(busy, busy + idle + iowait, steal=steal)
        elif len(words) == 2 and words[0] == "vm" and words[1].isdigit():
            vm = int(words[1])
    return None if times is None else CpuTimes(times.busy, times.total, vm, times.steal)


def other_share(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """Share of the host's CPU time busy with work other than the VM's processes."""
    if before is None or after is None or before.vm is None or after.vm is None:
        return None
    span = after.total - before.total
    if span <= 0:
        return None
    other = (after.busy - before.busy) - (after.vm - before.vm)
    return round(max(other, 0) / span, 3)


def group_ticks(pgid: int, proc: Path = Path("/proc")) -> int:
    """utime + stime of every process in process group `pgid` (clock ticks)."""
    total = 0
    for stat in proc.glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # fields after the name: state ppid pgrp ...
                total += int(fields[11]) + int(fields[12])  # utime stime
    return total


def busy_share(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """Share of all CPUs' time that was busy between two readings (None if unknown)."""
    if before is None or after is None or after.total <= before.total:
        return None
    return round((after.busy - before.busy) / (after.total - before.total), 3)


def read_local() -> CpuTimes | None:
    """This kernel's CPU times (the rig's own, natively or inside the VM)."""
    with contextlib.suppress(OSError, ValueError):
        return parse_cpu_line(PROC_STAT.read_text())
    return None


def read_host(results: Path) -> CpuTimes | None:
    """The host machine's CPU times, as the outer `mprig run` last wrote them into the
    campaign's results directory (VM mode)."""
    with contextlib.suppress(OSError, ValueError):
        return parse_cpu_line((results / HOST_CPU_FILE).read_text())
    return None


@dataclass(frozen=True)
class Reading:
    """CPU times at one moment: the rig's kernel and, in VM mode, the host machine."""

    rig: CpuTimes | None
    host: CpuTimes | None

    @classmethod
    def now(cls, results: Path, *, in_vm: bool) -> Reading:
        return cls(read_local(), read_host(results) if in_vm else None)


def during(before: Reading, after: Reading, *, in_vm: bool) -> dict[str, Any]:
    """run.json `rig_cpu`: busy shares over the traffic and the rig-limited verdict."""
    rig = busy_share(before.rig, after.rig)
    host = busy_share(before.host, after.host) if in_vm else rig
    other = other_share(before.host, after.host) if in_vm else None
    causes = []
    if rig is not None and rig >= SATURATED:
        where = f" (host {host:.0%}, QEMU's emulation included)" if in_vm and host else ""
        causes.append(f"{'guest' if in_vm else 'rig'} CPU {rig:.0%} busy during the traffic{where}")
    if other is not None and other >= CONTENDED:
        causes.append(f"other work took {other:.0%} of the host's CPUs from the VM")
    return {
        "rig_busy": rig,
        "host_busy": host,
        "host_other_busy": other,
        "threshold": SATURATED,
        "contended_threshold": CONTENDED,
        "rig_limited": bool(causes),
        "cause": "; ".join(causes),
    }


class HostCpuWriter:
    """Writes the host's /proc/stat `cpu` line to `path` every `every` seconds (atomically)
    while a VM runs the campaign, and once `pgid` is set (the VM's process group) a `vm
    TICKS` line with the CPU time of the VM's processes."""

    def __init__(self, path: Path, every: float = 0.5) -> None:
        self.path, self.every = path, every
        self.pgid: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> HostCpuWriter:
        self._write()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._write()

    def _write(self) -> None:
        with contextlib.suppress(OSError):
            line = next(ln for ln in PROC_STAT.read_text().splitlines() if ln.startswith("cpu "))
            if self.pgid is not None:
                line += f"\nvm {group_ticks(self.pgid)}"
            tmp = self.path.with_name(f"{self.path.name}.tmp")
            tmp.write_text(line + "\n")
            os.replace(tmp, self.path)
