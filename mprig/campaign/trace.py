"""Mahimahi link traces: one millisecond timestamp per line, each a delivery opportunity
for one 1500-byte packet; the trace loops (Mahimahi's mm-link restarts it at its last
timestamp). A trace becomes a rate schedule: delivery opportunities counted in bins of
`bin_ms`, times 1500 bytes, replayed with timed `tc qdisc change` (mprig/run/timeline.py).

Pure functions over text; `load` is the one reader, cached by the file's identity.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

PACKET_BITS = 1500 * 8  # Mahimahi: one opportunity delivers one MTU-sized packet
MAX_TRACE_BYTES = 8 << 20  # a trace is text; 8 MiB is hours of a fast link
MAX_PERIOD_MS = 24 * 3600 * 1000  # a day: longer than any run
# netem reads rate 0 as "unlimited" and tbf refuses it: an empty bin gets this rate instead
# (1.25 kB/s: the queue holds its packets, as Mahimahi's does until an opportunity comes)
MIN_RATE_MBIT = 0.01


@dataclass(frozen=True)
class Trace:
    """A parsed trace."""

    opportunities: tuple[int, ...]  # ms timestamps, non-decreasing, the last > 0
    period_ms: int  # the loop length: the last timestamp (as Mahimahi)

    @property
    def mean_mbit(self) -> float:
        """Average capacity over one period, Mbit/s."""
        return len(self.opportunities) * PACKET_BITS / (self.period_ms * 1000)


def parse(text: str) -> Trace:
    """A trace from its text; ValueError naming the first bad line."""
    stamps: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        word = line.strip()
        if not word:
            continue
        if not word.isdigit() or len(word) > 9:
            raise ValueError(f"line {number}: {word[:20]!r} is not a millisecond timestamp")
        stamp = int(word)
        if stamps and stamp < stamps[-1]:
            raise ValueError(
                f"line {number}: {stamp} ms comes after {stamps[-1]} ms; timestamps must not"
                " decrease"
            )
        stamps.append(stamp)
    if not stamps:
        raise ValueError("no timestamps: an empty trace delivers nothing")
    if stamps[-1] == 0 or stamps[-1] > MAX_PERIOD_MS:
        raise ValueError(f"the last timestamp ({stamps[-1]} ms) must be > 0 and <= a day")
    return Trace(tuple(stamps), stamps[-1])


def load(path: str) -> Trace:
    """Read and parse a trace file (relative paths from the current directory, as
    mm-link's); ValueError saying what is wrong with it."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    if not Path(path).is_file():
        raise ValueError(f"{path} is not a regular file")
    if st.st_size > MAX_TRACE_BYTES:
        raise ValueError(f"{path} is larger than {MAX_TRACE_BYTES >> 20} MiB")
    return _load(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=32)
def _load(path: str, _mtime: int, _size: int) -> Trace:
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read {path}: {e}") from None
    try:
        return parse(text)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def bin_rates(trace: Trace, bin_ms: int) -> list[float]:
    """Capacity (Mbit/s) of each bin of one period; the last bin may be shorter."""
    counts = [0] * -(-trace.period_ms // bin_ms)
    for stamp in trace.opportunities:  # stamp t is in millisecond (t - 1, t]
        counts[min(max(stamp - 1, 0) // bin_ms, len(counts) - 1)] += 1
    widths = [min(bin_ms, trace.period_ms - i * bin_ms) for i in range(len(counts))]
    return [n * PACKET_BITS / (w * 1000) for n, w in zip(counts, widths, strict=True)]


def schedule(trace: Trace, bin_ms: int, duration_s: float) -> list[tuple[float, float]]:
    """(start s, rate Mbit/s) steps covering `duration_s`, the trace looped; empty bins at
    MIN_RATE_MBIT. A step only where the rate moves by more than one opportunity per bin
    (the trace's own resolution), so evenly spread opportunities do not dither the rate,
    or where an outage (an empty bin) starts or ends."""
    rates = bin_rates(trace, bin_ms)
    quantum = PACKET_BITS / (bin_ms * 1000)
    steps: list[tuple[float, float]] = []
    start_ms = 0
    while start_ms < duration_s * 1000:
        for i, rate in enumerate(rates):
            t = (start_ms + i * bin_ms) / 1000
            if t >= duration_s:
                break
            rate = round(max(rate, MIN_RATE_MBIT), 6)
            if not steps or _moved(steps[-1][1], rate, quantum):
                steps.append((t, rate))
        start_ms += trace.period_ms
    return steps


def _moved(last: float, rate: float, quantum: float) -> bool:
    """A new step: more than one opportunity per bin apart, or into or out of an outage."""
    return abs(last - rate) > quantum + 1e-9 or (last == MIN_RATE_MBIT) != (rate == MIN_RATE_MBIT)


def capacity(trace: Trace, bin_ms: int, duration_s: float) -> list[tuple[float, float]]:
    """(bin start s, Mbit/s) of every bin over the run, looped: what the report draws."""
    rates = bin_rates(trace, bin_ms)
    out: list[tuple[float, float]] = []
    for k in range(int(duration_s * 1000 // trace.period_ms) + 1):
        for i, rate in enumerate(rates):
            t = (k * trace.period_ms + i * bin_ms) / 1000
            if t < duration_s:
                out.append((round(t, 3), round(rate, 6)))
    return out
