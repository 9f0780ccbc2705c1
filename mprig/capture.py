"""Capture: tcpdump on the capture hosts, the ss sampler on the sender, nstat counters.

Each tool has an argv builder here and a pure parser; the runner starts and stops them.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import re
import statistics
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from mprig.rig.host import check_interface

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

_PCAP_MAGIC = {  # classic pcap magic -> (byte order, timestamp fraction per second)
    0xA1B2C3D4: ("<", 1_000_000),
    0xA1B23C4D: ("<", 1_000_000_000),
    0xD4C3B2A1: (">", 1_000_000),
    0x4D3CB2A1: (">", 1_000_000_000),
}


@dataclass(frozen=True)
class PcapHeader:
    """What a classic pcap file's header says."""

    order: str  # struct byte order of the file
    per_second: int  # timestamp fractions per second (1e6 or 1e9)
    snaplen: int
    linktype: int


def read_pcap_header(f: IO[bytes], name: str) -> PcapHeader:
    """The header of a classic pcap file (as tcpdump -w writes); ValueError naming it."""
    head = f.read(24)
    if len(head) < 24:
        raise ValueError(f"{name}: not a pcap file (only {len(head)} bytes)")
    magic = struct.unpack("<I", head[:4])[0]
    if magic not in _PCAP_MAGIC:
        raise ValueError(f"{name}: not a classic pcap file (magic {head[:4].hex()})")
    order, per_second = _PCAP_MAGIC[magic]
    snaplen, linktype = struct.unpack(order + "II", head[16:24])
    return PcapHeader(order, per_second, snaplen, linktype & 0x0FFFFFFF)


def pcap_index(buf: bytes | mmap.mmap, h: PcapHeader) -> tuple[list[int], list[int]]:
    """(time ns, offset of the record header) per record of a classic pcap file's bytes; a
    record cut short at the end (tcpdump killed mid-write) ends the file."""
    unpack = struct.Struct(h.order + "IIII").unpack_from
    scale = 1_000_000_000 // h.per_second
    times: list[int] = []
    starts: list[int] = []
    pos, size = 24, len(buf)
    while pos + 16 <= size:
        sec, frac, caplen, _ = unpack(buf, pos)
        if pos + 16 + caplen > size:
            break
        times.append(sec * 1_000_000_000 + frac * scale)
        starts.append(pos)
        pos += 16 + caplen
    return times, starts


def _block(kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", kind, n) + body + struct.pack("<I", n)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def pcapng_idb(linktype: int, snaplen: int, name: str) -> bytes:
    """An interface description block: if_name, and nanosecond timestamps (if_tsresol 9)."""
    options = _option(2, name.encode()) + _option(9, b"\x09") + _option(0, b"")
    return _block(1, struct.pack("<HHI", linktype, 0, snaplen) + options)


def pcapng_epb(interface: int, t_ns: int, origlen: int, data: bytes) -> bytes:
    """An enhanced packet block."""
    head = struct.pack("<IIIII", interface, t_ns >> 32, t_ns & 0xFFFFFFFF, len(data), origlen)
    return _block(6, head + data)


PCAPNG_SHB = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))


_EPB_HEAD = struct.Struct("<IIIIIII")  # type, length, interface, time high, low, caplen, len
_U32 = struct.Struct("<I")
_PAD = (b"", b"\0\0\0", b"\0\0", b"\0")  # by caplen % 4


def merge_pcaps(parts: Sequence[tuple[str, Path]], out: Path) -> int:
    """Join one host's per-interface captures (interface name, classic pcap file) into one
    pcapng file, packets in time order (ties: the interface listed first), each tagged
    with its interface; returns the packet count. The files are mapped, not read into
    memory; per packet, an index entry and one block written."""
    with contextlib.ExitStack() as stack:
        bufs, orders, times, where = [], [], [], []
        idbs = []
        for k, (name, path) in enumerate(parts):
            f = stack.enter_context(path.open("rb"))
            h = read_pcap_header(f, str(path))
            idbs.append(pcapng_idb(h.linktype, h.snaplen, name))
            buf = stack.enter_context(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            at, starts = pcap_index(buf, h)
            bufs.append(buf)
            orders.append(struct.Struct(h.order + "IIII").unpack_from)
            times += at
            where += [(k, pos) for pos in starts]
        order = sorted(range(len(times)), key=times.__getitem__)  # stable: file order on ties
        with out.open("wb") as w:
            write = w.write
            write(PCAPNG_SHB)
            for idb in idbs:
                write(idb)
            for i in order:
                k, pos = where[i]
                buf = bufs[k]
                _, _, caplen, origlen = orders[k](buf, pos)
                total = 32 + caplen + (-caplen % 4)
                t = times[i]
                write(_EPB_HEAD.pack(6, total, k, t >> 32, t & 0xFFFFFFFF, caplen, origlen))
                write(buf[pos + 16 : pos + 16 + caplen])
                write(_PAD[caplen % 4] + _U32.pack(total))
    return len(order)


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
    """`nstat -asz --json`: absolute values of every counter, zeros too, history untouched,
    as JSON (collectors.nstat reads it)."""
    return ["nstat", "-asz", "--json"]
