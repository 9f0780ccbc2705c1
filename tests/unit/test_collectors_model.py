"""Property test: the compiled replay against a ten-line reference model of the MPTCP
receiver, on random two-subflow transfers (hypothesis). Each subflow carries data blocks in
its own order (any DSN order, some blocks sent on both subflows); the arrival order is a
random interleaving of the two subflows. The model and the core must agree on every count.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.analyze import analyze_pcap

KEY_C, KEY_S = 0x0102030405060708, 0x1112131415161718
KEY_WRAP = 2371058  # its IDSN ends in 0xffffffbb: 4-byte DSNs wrap within the first block
MSS = 100


def token_idsn(key: int) -> tuple[int, int]:
    digest = hashlib.sha256(key.to_bytes(8, "big")).digest()
    return int.from_bytes(digest[:4], "big"), int.from_bytes(digest[-8:], "big")


SERVER, CLIENTS = bytes([10, 0, 0, 1]), (bytes([10, 0, 1, 2]), bytes([10, 0, 2, 2]))


def frame(src: bytes, dst: bytes, sport: int, dport: int, flags: int, seq: int, opt: bytes,
          payload: int = 0) -> bytes:  # fmt: skip
    opt += b"\x01" * (-len(opt) % 4)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, 0, (20 + len(opt)) << 2,
                      flags, 65535, 0, 0) + opt  # fmt: skip
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + payload, 0, 0, 64, 6, 0, src, dst)
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + b"\x00" * payload


def handshake(key_s: int) -> list[bytes]:
    c1, c2 = CLIENTS
    k = struct.pack("!Q", KEY_C), struct.pack("!Q", key_s)
    join_syn_tail = struct.pack("!II", token_idsn(key_s)[0], 0)
    return [
        frame(c1, SERVER, 40001, 5201, 0x02, 100, b"\x1e\x04\x01\x01"),
        frame(SERVER, c1, 5201, 40001, 0x12, 0, b"\x1e\x0c\x01\x01" + k[1]),
        frame(c1, SERVER, 40001, 5201, 0x10, 101, b"\x1e\x14\x01\x01" + k[0] + k[1]),
        frame(c2, SERVER, 40002, 5201, 0x02, 100, b"\x1e\x0c\x10\x01" + join_syn_tail),
        frame(SERVER, c2, 5201, 40002, 0x12, 0, b"\x1e\x10\x10\x01" + b"\x00" * 12),
        frame(c2, SERVER, 40002, 5201, 0x10, 101, b"\x1e\x18\x10\x00" + b"\x00" * 20),
    ]  # fmt: skip


def data(sf: int, position: int, block: int, idsn: int, dsn8: bool) -> bytes:
    """Block `block` as the `position`-th segment of subflow sf, server -> client, with an
    8-byte or a 4-byte DSN."""
    dsn = (idsn + 1 + block * MSS) % 2**64
    if dsn8:
        dss = b"\x1e\x12\x20\x0c" + struct.pack("!QIH", dsn, 1 + position * MSS, MSS)
    else:
        dss = b"\x1e\x0e\x20\x04" + struct.pack("!IIH", dsn & 0xFFFFFFFF, 1 + position * MSS, MSS)
    return frame(SERVER, CLIENTS[sf], 5201, 40001 + sf, 0x18, 1 + position * MSS, dss, MSS)


def write(path: Path, frames: list[bytes]) -> None:
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i, f in enumerate(frames):
        out.append(struct.pack("<IIII", 1_700_000_000, i * 1000, len(f), len(f)) + f)
    path.write_bytes(b"".join(out))


@dataclass
class Expected:
    delivered_bytes: int = 0
    ooo_packets: int = 0
    ooo_arrivals: int = 0
    ooo_max_packets: int = 0
    duplicate_packets: int = 0
    reinjected_bytes: int = 0


def model(arrivals: list[tuple[int, int]]) -> Expected:
    """The receiver: in-order blocks advance rcv_nxt and drain the queue; early ones wait."""
    e, nxt = Expected(), 0
    queue: set[int] = set()
    first: dict[int, int] = {}
    for sf, b in arrivals:
        e.ooo_arrivals += b > nxt
        if b < nxt or b in queue:
            e.duplicate_packets += 1
            e.reinjected_bytes += MSS * (first[b] != sf)
            continue
        first[b] = sf
        if b > nxt:
            queue.add(b)
            e.ooo_packets += 1
            e.ooo_max_packets = max(e.ooo_max_packets, len(queue))
            continue
        nxt += 1
        while nxt in queue:
            queue.remove(nxt)
            nxt += 1
    e.delivered_bytes = nxt * MSS
    return e


def subflow_model(
    per_sf: list[list[int]], wire: list[tuple[int, int]]
) -> tuple[list[tuple[int, int]], int]:
    """Subflow reassembly: segments (sf, position) on the wire are released in position
    order; returns the (sf, block) sequence reaching MPTCP and the retransmission count
    (segments starting below the highest position seen on their subflow)."""
    released: list[tuple[int, int]] = []
    nxt, top, retrans = [0, 0], [-1, -1], 0
    held: list[set[int]] = [set(), set()]
    for sf, p in wire:
        retrans += p <= top[sf]
        top[sf] = max(top[sf], p)
        held[sf].add(p)
        while nxt[sf] in held[sf]:
            held[sf].remove(nxt[sf])
            released.append((sf, per_sf[sf][nxt[sf]]))
            nxt[sf] += 1
    return released, retrans


@st.composite
def transfers(draw: st.DrawFn) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """Blocks spread over two subflows (some sent on both), and the wire order of the
    segments: an interleaving of the subflows, each subflow's segments possibly reordered."""
    n = draw(st.integers(1, 25))
    blocks = draw(st.permutations(range(n)))
    on_first = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    pairs = list(zip(blocks, on_first, strict=True))
    per_sf = [[b for b, f in pairs if f], [b for b, f in pairs if not f]]
    for b in draw(st.lists(st.integers(0, n - 1), max_size=4)):  # reinjections
        other = 1 if b in per_sf[0] else 0
        per_sf[other].insert(draw(st.integers(0, len(per_sf[other]))), b)
    positions = [list(range(len(per_sf[0]))), list(range(len(per_sf[1])))]
    for sf in (0, 1):
        if draw(st.booleans()):  # reorder (or lose and retransmit) inside the subflow
            positions[sf] = draw(st.permutations(positions[sf]))
    order = draw(st.permutations([0] * len(per_sf[0]) + [1] * len(per_sf[1])))
    it = [iter(positions[0]), iter(positions[1])]
    return per_sf, [(sf, next(it[sf])) for sf in order]


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(t=transfers(), dsn8=st.booleans())
def test_replay_matches_the_reference_model(
    tmp_path_factory: pytest.TempPathFactory,
    t: tuple[list[list[int]], list[tuple[int, int]]],
    dsn8: bool,
) -> None:
    per_sf, wire = t
    key = KEY_S if dsn8 else KEY_WRAP
    idsn = token_idsn(key)[1]
    frames = handshake(key) + [data(sf, p, per_sf[sf][p], idsn, dsn8) for sf, p in wire]
    path = tmp_path_factory.mktemp("model") / "t.pcap"
    write(path, frames)
    (conn,) = analyze_pcap(path).connections
    s = conn.summary()
    got = Expected(**{k: s[k] for k in Expected.__dataclass_fields__})
    released, retrans = subflow_model(per_sf, wire)
    exp = model(released)
    assert got == exp
    assert s["ooo_max_bytes"] == exp.ooo_max_packets * MSS
    assert (s["packets"], s["unmapped_bytes"], s["retransmitted_packets"]) == (
        len(wire),
        0,
        retrans,
    )
