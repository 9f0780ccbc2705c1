"""Capture: tcpdump on the capture hosts, the ss sampler on the sender, nstat counters.

Each tool has an argv builder here and a pure parser; the runner starts and stops them.
"""

from __future__ import annotations

import re
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


# The ss sampler: every 100 ms a `# <unix time>` header, then `ss -tinHM` filtered to the
# traffic ports. A constant script: no campaign value reaches this shell.
SS_SCRIPT = (
    "while :; do printf '# %s\\n' \"$(date +%s.%N)\"; "
    "ss -tinHM '( sport = :5201 or dport = :5201 or sport = :5202 or dport = :5202 )'; "
    "sleep 0.1; done"
)


def ss_sampler_argv() -> list[str]:
    """The ss sampler, run in the background on the sender; its stdout is the artifact."""
    return ["sh", "-c", SS_SCRIPT]


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
