"""Where a campaign's start goes: seconds per phase from this process's start (the Python
interpreter and its imports included) to the first run, recorded in the campaign_start
event of events.jsonl as `startup_s` and said in one progress line. Inside the campaign VM,
under software emulation, the start took minutes; this says which phase to blame.

    startup.begin()           # in `mprig run`: phase "python" the first time in a process
    startup.mark("plan")      # the seconds since the previous mark (or begin)
    startup.phases()          # {"python": 0.4, "plan": 0.5, ...}, in order
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_phases: dict[str, float] = {}
_last: list[float] = []


def _process_start() -> float:
    """time.monotonic() when this process started (from /proc/self/stat; now if unknown)."""
    now = time.monotonic()
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # starttime, clock ticks after boot
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return now
    age = uptime - started_ticks / os.sysconf("SC_CLK_TCK")
    return now - max(age, 0.0)


def begin() -> None:
    """Start counting a campaign's start: the first in this process from the process's own
    start (phase `python`: the interpreter and the imports), a later one from now."""
    now = time.monotonic()
    _phases.clear()
    if not _last:
        _phases["python"] = round(now - _process_start(), 2)
    _last[:] = [now]


def mark(phase: str) -> None:
    """Record the seconds since the previous mark (the first: since the process started)
    as `phase`; a phase marked again adds up."""
    now = time.monotonic()
    if not _last:
        _last.append(_process_start())
    _phases[phase] = round(_phases.get(phase, 0.0) + now - _last[0], 2)
    _last[0] = now


def phases() -> dict[str, float]:
    """The phases marked so far, in order."""
    return dict(_phases)


def line(phases: dict[str, float]) -> str:
    """`start 41.2 s: python 0.4, plan 0.5, ...` for the progress display."""
    total = sum(phases.values())
    return f"start {total:.1f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items())
