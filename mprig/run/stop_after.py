"""`mprig run --stop-after DURATION`: a campaign that must end by a given time (a session, a
night, a machine booked until morning) starts no run it expects to end after DURATION; the
run in progress always finishes, so nothing is lost, and the next `mprig run` resumes with
the runs left.

How long the next run takes is the longest run seen so far in this invocation (a retry
included) but at least its traffic, or, before the first, its traffic plus FIRST_GUESS_S.
In the campaign VM the budget counts from the guest's boot (/proc/uptime), which is when the
`mprig run` outside started the VM, so the boot is not spent twice.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIRST_GUESS_S = 15.0  # what a run takes beyond its traffic before one has been timed
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s?)?$")


def parse_duration(text: str) -> float:
    """argparse type: `90m`, `2h`, `1h30m`, `5400s` or `5400` (seconds) -> seconds > 0."""
    m = _DURATION.match(text.strip())
    if not text.strip() or not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: write it as 90m, 2h, 1h30m or 5400s"
        )
    hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the duration must be above 0")
    return total


def since_boot() -> float:
    """time.monotonic() at this machine's boot (the campaign VM's start, inside it)."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        uptime = 0.0
    return time.monotonic() - uptime


@dataclass
class Budget:
    """The time a campaign may take, from `start` (time.monotonic())."""

    seconds: float
    start: float = field(default_factory=lambda: time.monotonic())
    longest: float = 0.0  # the longest run timed so far

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def expected(self, run: Any) -> float:
        """How long RUN is expected to take: never less than its traffic (the longest run so
        far may have failed in its first seconds)."""
        traffic = float(run.traffic.duration_s)
        return max(self.longest, traffic) if self.longest else traffic + FIRST_GUESS_S

    def room_for(self, run: Any) -> bool:
        """Whether RUN is expected to end within the budget."""
        return self.elapsed() + self.expected(run) <= self.seconds

    def timed(self, seconds: float) -> None:
        self.longest = max(self.longest, seconds)

    def stop_message(self, run: Any, left: int) -> str:
        return (
            f"--stop-after {_clock(self.seconds)}: {_clock(self.elapsed())} spent, a run takes "
            f"about {self.expected(run):.0f} s; stopping with {left} runs left (the next "
            "`mprig run` resumes with them)"
        )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m{secs:02d}s"
