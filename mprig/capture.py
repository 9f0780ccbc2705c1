"""Capture: tcpdump on the capture hosts, the ss sampler on the sender, nstat counters.

Each tool has an argv builder here and a pure parser; the runner starts and stops them.
"""

from __future__ import annotations

import itertools
import re
import statistics
from dataclasses import dataclass

SSH_PORT = 22  # the management SSH traffic is left out of every capture


def tcpdump_argv(out: str, snaplen: int) -> list[str]:
    """tcpdump on every interface (Linux SLL2), packet-buffered, without the SSH traffic."""
    return [
        *["tcpdump", "-i", "any", "-n", "-U", "-s", str(snaplen), "-w", out],
        *["not", "tcp", "port", str(SSH_PORT)],
    ]


def tcpdump_listening(log: str) -> bool:
    """Whether tcpdump's stderr says it is capturing (`tcpdump: listening on ...`)."""
    return "listening on " in log


@dataclass(frozen=True)
class TcpdumpSummary:
    """tcpdump's exit summary."""

    captured: int  # packets written to the file
    received: int  # packets the filter saw
    kernel_drops: int  # packets the kernel dropped before tcpdump could read them


_SUMMARY = {
    "captured": re.compile(r"^(\d+) packets? captured$", re.M),
    "received": re.compile(r"^(\d+) packets? received by filter$", re.M),
    "kernel_drops": re.compile(r"^(\d+) packets? dropped by kernel$", re.M),
}


def parse_tcpdump_exit(log: str) -> TcpdumpSummary:
    """Parse tcpdump's stderr after SIGINT; ValueError when the summary is missing (the
    capture did not end cleanly)."""
    values = {}
    for key, pattern in _SUMMARY.items():
        m = pattern.search(log)
        if m is None:
            raise ValueError(f"tcpdump: no '{key}' line in its exit summary")
        values[key] = int(m.group(1))
    return TcpdumpSummary(**values)


# The ss sampler: on a fixed schedule every $1 microseconds, a `# <unix time>` header, then
# `ss -tinHM` filtered to the traffic ports. A constant script (no campaign value reaches
# this shell) in which `ss` is the only program started per sample: the time comes from
# $EPOCHREALTIME and the wait from `read -t` on a pipe nobody writes to, both bash builtins.
# (`date` and `sleep` on top of `ss` cost 0.05-0.3 s each under VM emulation: the old
# `date; ss; sleep 0.1` loop sampled every 0.5-0.8 s there, and 0.107 s natively.) Each
# sample is due one interval after the previous one was due, not after it ended, so the
# cost of a sample does not add up; a sampler more than SS_CATCH_UP intervals behind (a
# stalled host) starts a new schedule rather than firing a burst, and a clock stepped back
# does not make it wait longer than one interval.
SS_CATCH_UP = 3
SS_SCRIPT = (
    "export LC_ALL=C; step=$1; exec 3<> <(:); due=${EPOCHREALTIME/./}; "
    "while :; do printf '# %s\\n' \"$EPOCHREALTIME\"; "
    "ss -tinHM '( sport = :5201 or dport = :5201 or sport = :5202 or dport = :5202 )'; "
    "now=${EPOCHREALTIME/./}; due=$((due + step)); "
    f"[ $due -lt $((now - {SS_CATCH_UP} * step)) ] && due=$now; "
    "[ $due -gt $((now + step)) ] && due=$((now + step)); "
    "w=$((due - now)); [ $w -gt 0 ] || continue; us=$((1000000 + w % 1000000)); "
    'read -t "$((w / 1000000)).${us#1}" -u 3; done'
)
SS_INTERVAL_S = 0.1  # the ss sampler's configured interval


def ss_sampler_argv(interval_s: float = SS_INTERVAL_S) -> list[str]:
    """The ss sampler, run in the background on the sender; its stdout is the artifact."""
    return ["bash", "-c", SS_SCRIPT, "mprig-ss", str(round(interval_s * 1e6))]


def ss_interval(samples: list[SsSample]) -> dict[str, float | int | None]:
    """The interval the sampler achieved (run.json `capture.ss_interval`): median and 95th
    percentile (nearest rank) of the gaps between sample timestamps, seconds."""
    gaps = sorted(b.time - a.time for a, b in itertools.pairwise(samples))
    median = statistics.median(gaps) if gaps else None
    p95 = gaps[round(0.95 * (len(gaps) - 1))] if gaps else None
    return {
        "configured_s": SS_INTERVAL_S,
        "median_s": None if median is None else round(median, 4),
        "p95_s": None if p95 is None else round(p95, 4),
        "samples": len(samples),
    }


@dataclass(frozen=True)
class SsSample:
    """One `ss -tinHM` sample."""

    time: float  # unix seconds from the `#` header
    sockets: tuple[tuple[str, str], ...]  # (first line, detail line) per socket


def parse_ss_samples(text: str) -> list[SsSample]:
    """Split sampler output into samples; each socket is its line plus its detail line."""
    samples: list[SsSample] = []
    time: float | None = None
    lines: list[str] = []
    for line in [*text.splitlines(), "# end"]:
        if line.startswith("# "):
            if time is not None:
                samples.append(SsSample(time, _pair(lines)))
            head = line[2:].strip()
            time, lines = (float(head) if head != "end" else None), []
        elif line.strip():
            lines.append(line)
    return samples


def _pair(lines: list[str]) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for line in lines:
        if line[:1].isspace() and out:
            out[-1] = (out[-1][0], line.strip())
        else:
            out.append((" ".join(line.split()), ""))
    return tuple(out)


def nstat_argv() -> list[str]:
    """`nstat -asz`: absolute values of every counter, zeros too, history untouched."""
    return ["nstat", "-asz"]


def parse_nstat(text: str) -> dict[str, int]:
    """Counter name -> value from `nstat -a` text output."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith("#") and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out
