"""Capture: tcpdump on the capture hosts, the ss sampler on the sender, nstat counters.

Each tool has an argv builder here and a pure parser; the runner starts and stops them.
"""

from __future__ import annotations

import itertools
import re
import statistics
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mprig import _pcapmerge
from mprig.rig.host import check_interface
from mprig.run import traffic

SSH_PORT = 22  # the management SSH traffic is left out of every capture
# IP only: ARP, LLDP and the EAPOL frames of a Wi-Fi client's WPA2 key exchange stay out.
CAPTURE_FILTER = ["(", "ip", "or", "ip6", ")", "and", "not", "tcp", "port", str(SSH_PORT)]


def tcpdump_argv(out: str, snaplen: int, interface: str) -> list[str]:
    """tcpdump on one data interface, packet-buffered, IP only, without the SSH traffic.
    A host with several data interfaces runs one per interface (never `-i any`, which also
    records the management network and a Wi-Fi client's key exchanges); merge_pcaps joins
    their files."""
    return [
        *["tcpdump", "-i", check_interface(interface), "-n", "-U", "-s", str(snaplen)],
        *["-w", out, *CAPTURE_FILTER],
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
    """Parse tcpdump's stderr after SIGINT (or join_tcpdump_logs' text: the interfaces'
    summaries added up); ValueError when a summary is missing (a capture did not end
    cleanly), naming the interface."""
    total = TcpdumpSummary(0, 0, 0)
    for name, text in _log_sections(log):
        values = {}
        for key, pattern in _SUMMARY.items():
            m = pattern.search(text)
            if m is None:
                where = f"{name}: " if name else ""
                raise ValueError(f"tcpdump: {where}no '{key}' line in its exit summary")
            values[key] = int(m.group(1))
        total = TcpdumpSummary(
            total.captured + values["captured"],
            total.received + values["received"],
            total.kernel_drops + values["kernel_drops"],
        )
    return total


LOG_HEADER = "# tcpdump -i "  # starts each interface's part of a joined log


def join_tcpdump_logs(logs: dict[str, str]) -> str:
    """One text of several interfaces' tcpdump logs (the bundle's tcpdump-<host>.log)."""
    return "".join(f"{LOG_HEADER}{name}\n{text.rstrip()}\n" for name, text in logs.items())


def _log_sections(log: str) -> list[tuple[str, str]]:
    """(interface, text) per part of a joined log; ("", log) for a single tcpdump's log."""
    if not log.startswith(LOG_HEADER):
        return [("", log)]
    parts = log.split(f"\n{LOG_HEADER}")
    out = []
    for part in parts:
        head, _, body = part.removeprefix(LOG_HEADER).partition("\n")
        out.append((head.strip(), body))
    return out


# -- joining per-interface captures ----------------------------------------------------------


def merge_pcaps(parts: Sequence[tuple[str, Path]], out: Path) -> int:
    """Join one host's per-interface captures (interface name, classic pcap file) into one
    pcapng file, packets in time order (ties: the interface listed first), each tagged
    with its interface (an interface block each: linktype, snaplen, if_name, nanosecond
    timestamps); returns the packet count. A record cut short at the end of a file
    (tcpdump killed mid-write) ends that file. Compiled (mprig/_pcapmerge.c): in Python
    the join took a good part of a second per run under VM emulation. ValueError names a
    file that is not a classic pcap."""
    return _pcapmerge.merge(str(out), [(name, str(path)) for name, path in parts])


def pcapng_interfaces(path: Path) -> list[tuple[str, int]]:
    """(if_name, linktype) of every interface block of a pcapng file (for checks)."""
    data, found, pos = path.read_bytes(), [], 0
    while pos + 12 <= len(data):
        kind, n = struct.unpack("<II", data[pos : pos + 8])
        if kind == 1:
            linktype = struct.unpack("<H", data[pos + 8 : pos + 10])[0]
            found.append((_if_name(data[pos + 16 : pos + n - 4]), linktype))
        pos += n
    return found


def _if_name(options: bytes) -> str:
    pos = 0
    while pos + 4 <= len(options):
        code, n = struct.unpack("<HH", options[pos : pos + 4])
        if code == 2:
            return options[pos + 4 : pos + 4 + n].decode()
        if code == 0:
            break
        pos += 4 + n + (-n % 4)
    return ""


# The ss sampler (mprig/run/ss_agent.py): one process on the sender that writes, on a fixed
# schedule every SS_INTERVAL_S, a `# <unix time>` header and what `ss -tinHM` prints for the
# traffic ports, from its own sock_diag netlink socket. It replaced a bash loop that ran
# `ss` for each sample: under VM emulation an `ss` costs 0.3-0.8 s (exec and 17 shared
# libraries), so that loop ran back to back and itself took the guest from 79 % to 96 % busy
# beside a 50 Mbit/s flow. Each sample is due one interval after the previous one was due,
# not after it ended; a sampler more than 3 intervals behind starts a new schedule rather
# than firing a burst. SIGTERM ends it between two samples.
SS_INTERVAL_S = 0.1  # the ss sampler's configured interval
SS_PORTS = (traffic.IPERF3_PORT, traffic.BULK_PORT)  # the sockets it reports
SS_SOURCE_NAME = "mprig/run/ss_agent.py"  # how `mprig plan --commands` shows its source


@cache
def ss_source() -> str:
    """The sampler's source text, sent as `python3 -c`."""
    return Path(__file__).with_name("ss_agent.py").read_text()


def ss_sampler_argv(
    interval_s: float = SS_INTERVAL_S, ports: Sequence[int] = SS_PORTS
) -> list[str]:
    """The ss sampler, run in the background on the sender; its stdout is the artifact.
    `-I -S`: no user site, no site module (a bare start 20 ms instead of 67 ms natively,
    where each costs tens of times more under emulation)."""
    interval = str(round(interval_s * 1e6))
    return ["python3", "-I", "-S", "-c", ss_source(), interval, *map(str, ports)]


def ss_shown(argv: list[str]) -> list[str]:
    """The sampler's argv for people (`mprig plan --commands`): its source as a name."""
    return [SS_SOURCE_NAME if a == ss_source() else a for a in argv]


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


# What `nstat -asz --json` prints (absolute values of every counter, zeros too, history
# untouched: {"kernel": {"<Name>": value, ...}}), read from /proc/net by bash builtins:
# under VM emulation nstat costs 0.1-0.27 s a call and a run makes four, two of them on the
# set-up's and the stop's critical path. As nstat: /proc/net/snmp, snmp6, then netstat; a
# header line and a value line per protocol ("Tcp:" + "ActiveOpens" -> TcpActiveOpens);
# snmp6 one "name value" per line; and, as nstat's useless_number(), seven constants left
# out. tests/integration/test_nstat_builtin_native.py compares it with nstat itself.
# Each file is taken whole first (`$(< file)`: sequential reads, one printing of the file)
# and parsed from that copy: `read` on the file itself takes 128-byte chunks and seeks back
# after each line, and a seek on a /proc seq_file prints it again with newer counters, so
# a snapshot taken during traffic tore (a CI run saved "IpExt0":MPCapableFallbackSYNACK).
NSTAT_SCRIPT = (
    "s=; rd() { local p h v i; while read -r -a h && read -r -a v; do p=${h[0]%:}; "
    "for ((i = 1; i < ${#h[@]}; i++)); do case $p${h[i]} in "
    "IpForwarding|IpDefaultTTL|TcpRtoAlgorithm|TcpRtoMin|TcpRtoMax|TcpMaxConn|TcpCurrEstab) ;; "
    '*) s+=",\\"$p${h[i]}\\":${v[i]}" ;; esac; done; done <<< "$1"; }; '
    'rd "$(< /proc/net/snmp)"; '
    'while read -r n v; do s+=",\\"$n\\":$v"; done <<< "$(< /proc/net/snmp6)"; '
    'rd "$(< /proc/net/netstat)"; printf \'{"kernel":{%s}}\\n\' "${s#,}"'
)


def nstat_argv() -> list[str]:
    """The kernel's SNMP/MIB counters as `nstat -asz --json` prints them (collectors.nstat
    reads them), without a program started (NSTAT_SCRIPT)."""
    return ["bash", "-c", NSTAT_SCRIPT, "mprig-nstat"]
