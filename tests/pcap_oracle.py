"""The pcapng join stated in Python, block by block: the oracle mprig/_pcapmerge.c is checked
against byte for byte (tests/unit/test_capture.py). Not used by mprig itself."""

from __future__ import annotations

import io
import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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


def merge(parts: Sequence[tuple[str, Path]], out: Path) -> int:
    """What mprig.run.capture.merge_pcaps writes: the section header, an interface block per
    part, every complete record as an enhanced packet block, stably sorted by time."""
    idbs, packets = [], []
    for k, (name, path) in enumerate(parts):
        data = path.read_bytes()
        h = read_pcap_header(io.BytesIO(data), str(path))
        idbs.append(pcapng_idb(h.linktype, h.snaplen, name))
        for t, pos in zip(*pcap_index(data, h), strict=True):
            _, _, caplen, origlen = struct.unpack_from(h.order + "IIII", data, pos)
            packets.append((t, pcapng_epb(k, t, origlen, data[pos + 16 : pos + 16 + caplen])))
    packets.sort(key=lambda p: p[0])
    out.write_bytes(PCAPNG_SHB + b"".join(idbs) + b"".join(block for _, block in packets))
    return len(packets)
