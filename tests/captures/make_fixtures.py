"""Generate the synthetic MPTCP capture fixtures (deterministic: run it again and the files
come out byte-identical).

    .venv/bin/python tests/captures/make_fixtures.py

Scapy builds every packet; a small writer stores them as pcap (microsecond or nanosecond),
pcapng, or with a Linux SLL2 header, so one scenario can be checked in every container.
Each scenario's docstring is its story; the expected values are computed by hand in
tests/unit/test_collectors_fixtures.py.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrHopByHop
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet, Raw

OUT = Path(__file__).resolve().parent / "test_collectors_fixtures"
EPOCH_NS = 1_700_000_000 * 10**9
KEY_CLIENT = 0x1111_2222_3333_4444
KEY_SERVER = 0xAAAA_BBBB_CCCC_DDDD
# SHA-256 of this key ends in 0xffffffbb, so 4-byte DSNs wrap after 68 bytes of data.
KEY_SERVER_WRAP = 2371058
SERVER = "10.0.0.1"
CLIENT1, CLIENT2 = "10.0.1.2", "10.0.2.2"
CLIENT6, SERVER6 = "fd00:2::2", "fd00::1"
MSS = 1000


def token_idsn(key: int, version: int) -> tuple[int, int]:
    """RFC 8684 (SHA-256) / RFC 6824 (SHA-1): token = top 32 bits, IDSN = low 64 bits."""
    h = (hashlib.sha1 if version == 0 else hashlib.sha256)(key.to_bytes(8, "big")).digest()
    return int.from_bytes(h[:4], "big"), int.from_bytes(h[-8:], "big")


# --------------------------------------------------------------------- MPTCP options


def mpc(version: int, *keys: int, dlen: int | None = None, csum: bool = False) -> bytes:
    raw = bytes([version, 0x81 if csum else 0x01]) + b"".join(k.to_bytes(8, "big") for k in keys)
    return raw + (struct.pack("!H", dlen) if dlen is not None else b"")


def join_syn(token: int, backup: bool = False) -> bytes:
    return bytes([0x10 | int(backup), 1]) + struct.pack("!II", token, 0x01020304)


def join_synack() -> bytes:
    return bytes([0x10, 1]) + b"\x00" * 8 + struct.pack("!I", 0x05060708)


def join_ack() -> bytes:
    return bytes([0x10, 0]) + b"\x00" * 20


def dss(
    dsn: int | None = None,
    ssn: int = 0,
    dlen: int = 0,
    *,
    ack: int | None = 1,
    dsn8: bool = True,
    csum: bool = False,
    fin: bool = False,
) -> bytes:
    """DSS: optional 8-byte DATA_ACK, optional mapping (8- or 4-byte DSN)."""
    flags = (0x10 if fin else 0) | (0x03 if ack is not None else 0)
    body = b"" if ack is None else struct.pack("!Q", ack)
    if dsn is not None:
        flags |= 0x04 | (0x08 if dsn8 else 0)
        body += struct.pack("!Q" if dsn8 else "!I", dsn if dsn8 else dsn & 0xFFFFFFFF)
        body += struct.pack("!IH", ssn, dlen) + (b"\xbe\xef" if csum else b"")
    return bytes([0x20, flags]) + body


# ------------------------------------------------------------------------- packets


@dataclass
class Sub:
    """One subflow: the client end, the server end, initial sequence numbers."""

    client: str
    server: str
    cport: int
    sport: int = 5201
    isn_c: int = 1000
    isn_s: int = 50000

    def pkt(
        self, from_server: bool, flags: str, seq: int, ack: int, opt: bytes | None, size: int = 0
    ) -> Packet:
        v6 = ":" in self.client
        src, dst = (self.server, self.client) if from_server else (self.client, self.server)
        if not v6:
            ip: Packet = IP(src=src, dst=dst, id=0)
        elif size:  # IPv6 data carries a hop-by-hop header, which the reader must skip
            ip = IPv6(src=src, dst=dst) / IPv6ExtHdrHopByHop()
        else:
            ip = IPv6(src=src, dst=dst)
        tcp = TCP(
            sport=self.sport if from_server else self.cport,
            dport=self.cport if from_server else self.sport,
            flags=flags,
            seq=seq & 0xFFFFFFFF,
            ack=ack & 0xFFFFFFFF,
            window=65535,
            options=[(30, opt)] if opt is not None else [],
        )
        mac = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x86DD if v6 else 0x0800)
        p = mac / ip / tcp
        return p / Raw(b"\x00" * size) if size else p


@dataclass
class Scenario:
    """Timed packets of one capture."""

    packets: list[tuple[float, Packet]] = field(default_factory=list)

    def at(self, t: float, p: Packet) -> None:
        self.packets.append((t, p))


def handshake_v1(sc: Scenario, s: Sub, key_s: int = KEY_SERVER, csum: bool = False) -> None:
    sc.at(0.000, s.pkt(False, "S", s.isn_c, 0, mpc(1, csum=csum)))
    sc.at(0.001, s.pkt(True, "SA", s.isn_s, s.isn_c + 1, mpc(1, key_s, csum=csum)))
    sc.at(0.002, s.pkt(False, "A", s.isn_c + 1, s.isn_s + 1, mpc(1, KEY_CLIENT, key_s, csum=csum)))


def join(sc: Scenario, s: Sub, t: float, token: int) -> None:
    sc.at(t, s.pkt(False, "S", s.isn_c, 0, join_syn(token)))
    sc.at(t + 0.001, s.pkt(True, "SA", s.isn_s, s.isn_c + 1, join_synack()))
    sc.at(t + 0.002, s.pkt(False, "A", s.isn_c + 1, s.isn_s + 1, join_ack()))


def down(s: Sub, ssn: int, dsn: int | None, size: int = MSS, **kw: object) -> Packet:
    """Server -> client data at relative subflow sequence ssn (mapping when dsn given)."""
    opt = dss(dsn, ssn, size, **kw) if dsn is not None else None  # type: ignore[arg-type]
    return s.pkt(True, "PA", s.isn_s + ssn, s.isn_c + 1, opt, size)


def two_subflows(key_s: int = KEY_SERVER, isn_s: int = 50000) -> tuple[Scenario, Sub, Sub, int]:
    sc = Scenario()
    s1 = Sub(CLIENT1, SERVER, 40001, isn_s=isn_s)
    s2 = Sub(CLIENT2, SERVER, 40002, isn_c=7000, isn_s=isn_s)
    handshake_v1(sc, s1, key_s)
    token, idsn = token_idsn(key_s, 1)
    join(sc, s2, 0.003, token)
    return sc, s1, s2, idsn


# ---------------------------------------------------------------------- scenarios


def reorder_two_subflows(isn_s: int = 50000) -> Scenario:
    """P3, P4 on subflow 0 overtake P2 on subflow 1; later P7 overtakes P6."""
    sc, s1, s2, i = two_subflows(isn_s=isn_s)
    for t, s, ssn, rel in [
        (0.10, s1, 1, 1),
        (0.11, s1, 1001, 2001),
        (0.12, s1, 2001, 3001),
        (0.13, s2, 1, 1001),
        (0.14, s2, 1001, 4001),
        (0.15, s1, 3001, 6001),
        (0.16, s2, 2001, 5001),
    ]:
        sc.at(t, down(s, ssn, i + rel))
    return sc


def subflow_loss_retransmission() -> Scenario:
    """P2 (subflow 0) is lost and retransmitted; P3 is retransmitted again spuriously."""
    sc, s1, s2, i = two_subflows()
    sc.at(0.10, down(s1, 1, i + 1))
    sc.at(0.11, down(s1, 2001, i + 2001))
    sc.at(0.12, down(s2, 1, i + 3001))
    sc.at(0.13, down(s1, 1001, i + 1001))
    sc.at(0.14, down(s1, 2001, i + 2001))
    return sc


def reinjection_other_subflow() -> Scenario:
    """P2 is late on subflow 1; the sender reinjects it on subflow 0; the original comes
    in last as a duplicate."""
    sc, s1, s2, i = two_subflows()
    sc.at(0.10, down(s1, 1, i + 1))
    sc.at(0.11, down(s1, 1001, i + 2001))
    sc.at(0.12, down(s1, 2001, i + 1001))
    sc.at(0.13, down(s2, 1, i + 1001))
    return sc


def mapping_over_segments() -> Scenario:
    """One DSS mapping of 3000 bytes covers three segments; a fourth has its own."""
    sc, s1 = Scenario(), Sub(CLIENT1, SERVER, 40001)
    handshake_v1(sc, s1)
    _, i = token_idsn(KEY_SERVER, 1)
    p1 = down(s1, 1, None)
    p1[TCP].options = [(30, dss(i + 1, 1, 3 * MSS))]
    sc.at(0.10, p1)
    sc.at(0.11, down(s1, 1001, None))
    sc.at(0.12, down(s1, 2001, None))
    sc.at(0.13, down(s1, 3001, i + 3001))
    return sc


def late_mapping() -> Scenario:
    """P1 arrives without a mapping; P2 carries the mapping for both; P3 is never mapped."""
    sc, s1 = Scenario(), Sub(CLIENT1, SERVER, 40001)
    handshake_v1(sc, s1)
    _, i = token_idsn(KEY_SERVER, 1)
    sc.at(0.10, down(s1, 1, None))
    p2 = down(s1, 1001, None)
    p2[TCP].options = [(30, dss(i + 1, 1, 2 * MSS))]
    sc.at(0.11, p2)
    sc.at(0.12, down(s1, 2001, None))
    return sc


def dsn_wrap_32bit() -> Scenario:
    """4-byte DSNs that wrap past 2**32 within the transfer; P3 overtakes P2."""
    sc, s1, s2, i = two_subflows(KEY_SERVER_WRAP)
    sc.at(0.10, down(s1, 1, i + 1, dsn8=False))
    sc.at(0.11, down(s1, 1001, i + 2001, dsn8=False))
    sc.at(0.12, down(s2, 1, i + 1001, dsn8=False))
    return sc


def v0_handshake() -> Scenario:
    """RFC 6824 (version 0): keys in SYN, SYN-ACK and ACK, SHA-1 token, 4-byte DSNs."""
    sc, s1, s2 = Scenario(), Sub(CLIENT1, SERVER, 40001), Sub(CLIENT2, SERVER, 40002, isn_c=7000)
    sc.at(0.000, s1.pkt(False, "S", s1.isn_c, 0, mpc(0, KEY_CLIENT)))
    sc.at(0.001, s1.pkt(True, "SA", s1.isn_s, s1.isn_c + 1, mpc(0, KEY_SERVER)))
    sc.at(0.002, s1.pkt(False, "A", s1.isn_c + 1, s1.isn_s + 1, mpc(0, KEY_CLIENT, KEY_SERVER)))
    token, i = token_idsn(KEY_SERVER, 0)
    join(sc, s2, 0.003, token)
    sc.at(0.10, down(s1, 1, i + 1, dsn8=False))
    sc.at(0.11, down(s2, 1, i + 1001, dsn8=False))
    return sc


def dss_checksum() -> Scenario:
    """Checksums negotiated (MP_CAPABLE flag A) and carried in every DSS mapping."""
    sc, s1 = Scenario(), Sub(CLIENT1, SERVER, 40001)
    handshake_v1(sc, s1, csum=True)
    _, i = token_idsn(KEY_SERVER, 1)
    sc.at(0.10, down(s1, 1, i + 1, csum=True))
    sc.at(0.11, down(s1, 1001, i + 1001, csum=True))
    return sc


def fallback_infinite_mapping() -> Scenario:
    """After one mapped segment the sender falls back: an infinite mapping (length 0)
    covers the rest of the subflow, which then carries no DSS."""
    sc, s1 = Scenario(), Sub(CLIENT1, SERVER, 40001)
    handshake_v1(sc, s1)
    _, i = token_idsn(KEY_SERVER, 1)
    sc.at(0.10, down(s1, 1, i + 1))
    p2 = down(s1, 1001, None)
    p2[TCP].options = [(30, dss(i + 1001, 1001, 0))]
    sc.at(0.11, p2)
    sc.at(0.12, down(s1, 2001, None))
    sc.at(0.13, down(s1, 3001, None))
    return sc


def ipv6_subflow() -> Scenario:
    """An IPv4 initial subflow joined by an IPv6 subflow whose P2 overtakes P1."""
    sc, s1, s2 = Scenario(), Sub(CLIENT1, SERVER, 40001), Sub(CLIENT6, SERVER6, 40002)
    handshake_v1(sc, s1)
    token, i = token_idsn(KEY_SERVER, 1)
    join(sc, s2, 0.003, token)
    sc.at(0.10, down(s2, 1, i + 1001))
    sc.at(0.11, down(s1, 1, i + 1))
    return sc


def ipv6_initial_ipv4_join() -> Scenario:
    """What a mixed-family campaign makes (mprig/campaign/ipfamily.py): an IPv6 initial subflow (the
    only kind of connection that can hold both families) joined by an IPv4 subflow to the
    server's announced IPv4 address; the IPv4 subflow's P2 overtakes the IPv6 one's P1, and
    the IPv6 subflow then carries P3."""
    sc = Scenario()
    s1, s2 = Sub("fd00:1:1::2", SERVER6, 40001), Sub("10.2.1.2", SERVER, 40002)
    handshake_v1(sc, s1)
    token, i = token_idsn(KEY_SERVER, 1)
    join(sc, s2, 0.003, token)
    sc.at(0.10, down(s2, 1, i + 1001))
    sc.at(0.11, down(s1, 1, i + 1))
    sc.at(0.12, down(s1, 1001, i + 2001))
    return sc


def both_directions_mpc_data() -> Scenario:
    """The client sends first (v1 MP_CAPABLE carrying data: an implicit mapping), then one
    more mapped segment; the server answers with one segment."""
    sc, s = Scenario(), Sub(CLIENT1, SERVER, 40001)
    handshake_v1(sc, s)
    _, ic = token_idsn(KEY_CLIENT, 1)
    _, i_s = token_idsn(KEY_SERVER, 1)
    opt = mpc(1, KEY_CLIENT, KEY_SERVER, dlen=500)
    sc.at(0.10, s.pkt(False, "PA", s.isn_c + 1, s.isn_s + 1, opt, 500))
    sc.at(0.11, s.pkt(False, "PA", s.isn_c + 501, s.isn_s + 1, dss(ic + 501, 501, 700), 700))
    sc.at(0.12, down(s, 1, i_s + 1, 300))
    return sc


def port_reuse() -> Scenario:
    """Two MPTCP connections one after the other on the same 4-tuple: the first sends one
    segment and closes with FIN; the second (new keys, new ISNs) sends two."""
    sc, s = Scenario(), Sub(CLIENT1, SERVER, 40001)
    handshake_v1(sc, s)
    _, i = token_idsn(KEY_SERVER, 1)
    sc.at(0.10, down(s, 1, i + 1))
    sc.at(0.11, s.pkt(True, "FA", s.isn_s + 1001, s.isn_c + 1, dss(i + 1001, 0, 1, fin=True)))
    sc.at(0.12, s.pkt(False, "FA", s.isn_c + 1, s.isn_s + 1002, None))
    s2 = Sub(CLIENT1, SERVER, 40001, isn_c=90000, isn_s=123456)
    key2 = KEY_SERVER + 1
    for t, p in [
        (1.000, s2.pkt(False, "S", s2.isn_c, 0, mpc(1))),
        (1.001, s2.pkt(True, "SA", s2.isn_s, s2.isn_c + 1, mpc(1, key2))),
        (1.002, s2.pkt(False, "A", s2.isn_c + 1, s2.isn_s + 1, mpc(1, KEY_CLIENT, key2))),
    ]:
        sc.at(t, p)
    _, i2 = token_idsn(key2, 1)
    sc.at(1.10, down(s2, 1001, i2 + 1001))
    sc.at(1.11, down(s2, 1, i2 + 1))
    return sc


def held_release_one_skb() -> Scenario:
    """Subflow 0 loses the first of three segments under one 3000-byte mapping; the other
    two wait in subflow reassembly until the retransmission; all three then reach MPTCP
    together, out of order (subflow 1's DSN 1 comes last). The kernel would have coalesced
    them into one skb: one OFO-queue event for three out-of-order packets."""
    sc, s1, s2, i = two_subflows()
    sc.at(0.10, down(s1, 1001, None))
    sc.at(0.11, down(s1, 2001, None))
    p1 = down(s1, 1, None)
    p1[TCP].options = [(30, dss(i + 1001, 1, 3 * MSS))]
    sc.at(0.12, p1)
    sc.at(0.13, down(s2, 1, i + 1))
    return sc


def many_gaps() -> Scenario:
    """Subflow 1 brings 70 chunks of 10 bytes, each 10 bytes apart (all out of order); then
    one 1410-byte segment on subflow 0 covers DSN 1..1410: it fills the 70 gaps and the
    tail (71 new pieces, more than the core handles in one batch) and repeats the 700 queued
    bytes."""
    sc, s1, s2, i = two_subflows()
    for k in range(70):
        sc.at(0.10 + k * 0.001, down(s2, 1 + 10 * k, i + 11 + 20 * k, 10))
    sc.at(0.20, down(s1, 1, i + 1, 1410))
    return sc


def signalling_options() -> Scenario:
    """One segment of data, then every signalling option once on pure ACKs: ADD_ADDR,
    REMOVE_ADDR, MP_PRIO (backup), MP_FAIL, MP_FASTCLOSE, MP_TCPRST."""
    sc, s = Scenario(), Sub(CLIENT1, SERVER, 40001)
    handshake_v1(sc, s)
    _, i = token_idsn(KEY_SERVER, 1)
    sc.at(0.10, down(s, 1, i + 1))
    options = [
        bytes([0x30, 1]) + bytes([10, 0, 3, 1]) + b"\x00" * 8,  # ADD_ADDR id 1 + HMAC
        bytes([0x40, 1]),  # REMOVE_ADDR id 1
        bytes([0x51, 0]),  # MP_PRIO, backup
        bytes([0x60, 0]) + struct.pack("!Q", i + 1),  # MP_FAIL at a DSN
        bytes([0x70, 0]) + struct.pack("!Q", KEY_SERVER),  # MP_FASTCLOSE with the key
        bytes([0x80, 0]),  # MP_TCPRST
    ]
    for n, opt in enumerate(options):
        sc.at(0.11 + n * 0.001, s.pkt(False, "A", s.isn_c + 1, s.isn_s + 1001, opt))
    return sc


def noise_and_reorder() -> Scenario:
    """reorder_two_subflows with ARP, UDP and ICMP-free noise around it."""
    sc = reorder_two_subflows()
    arp = Ether(src="02:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=SERVER, pdst=CLIENT1)
    udp = (
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / IP(src=SERVER, dst=CLIENT1, id=0)
        / UDP(sport=53, dport=5353)
        / Raw(b"\x00" * 40)
    )
    sc.at(0.105, arp)
    sc.at(0.125, udp)
    sc.packets.sort(key=lambda tp: tp[0])
    return sc


def plain_tcp() -> Scenario:
    """A TCP connection without MPTCP."""
    sc, s = Scenario(), Sub(CLIENT1, SERVER, 40001)
    sc.at(0.000, s.pkt(False, "S", s.isn_c, 0, None))
    sc.at(0.001, s.pkt(True, "SA", s.isn_s, s.isn_c + 1, None))
    sc.at(0.002, s.pkt(False, "A", s.isn_c + 1, s.isn_s + 1, None))
    sc.at(0.10, down(s, 1, None))
    return sc


# ------------------------------------------------------------------------ writers


def _records(sc: Scenario) -> list[tuple[int, bytes]]:
    return [(EPOCH_NS + round(t * 1e9), bytes(p)) for t, p in sc.packets]


def write_pcap(
    path: Path,
    recs: list[tuple[int, bytes]],
    *,
    nsec: bool = False,
    linktype: int = 1,
    snaplen: int = 65535,
) -> None:
    out = [
        struct.pack("<IHHiIII", 0xA1B23C4D if nsec else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)
    ]
    for t_ns, data in recs:
        sec, rest = divmod(t_ns, 10**9)
        cap = data[:snaplen]
        out.append(struct.pack("<IIII", sec, rest if nsec else rest // 1000, len(cap), len(data)))
        out.append(cap)
    path.write_bytes(b"".join(out))


def _block(btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)


def _packet_block(obsolete: bool, iface: int, ticks: int, data: bytes) -> bytes:
    """Enhanced packet block, or the obsolete packet block (16-bit interface + drops)."""
    head = struct.pack("<HH", iface, 0) if obsolete else struct.pack("<I", iface)
    body = struct.pack("<III", ticks >> 32, ticks & 0xFFFFFFFF, len(data)) + struct.pack(
        "<I", len(data)
    )
    return _block(2 if obsolete else 6, head + body + data)


def write_pcapng(path: Path, recs: list[tuple[int, bytes]], obsolete: bool = False) -> None:
    """Two interfaces: Linux SLL2 in microseconds (the handshakes, first 6 packets) and
    Ethernet in nanoseconds (the rest), as a capture on two different links would be."""
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    tsresol_ns = struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0)
    idb0 = _block(1, struct.pack("<HHI", 276, 0, 65535))
    idb1 = _block(1, struct.pack("<HHI", 1, 0, 65535) + tsresol_ns)
    blocks = [_packet_block(obsolete, 0, t // 1000, d) for t, d in to_sll2(recs[:6])]
    blocks += [_packet_block(obsolete, 1, t, d) for t, d in recs[6:]]
    path.write_bytes(shb + idb0 + idb1 + b"".join(blocks))


def write_pcap_big_endian(path: Path, recs: list[tuple[int, bytes]]) -> None:
    out = [struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for t_ns, data in recs:
        sec, rest = divmod(t_ns, 10**9)
        out.append(struct.pack(">IIII", sec, rest // 1000, len(data), len(data)) + data)
    path.write_bytes(b"".join(out))


def to_raw_ip(recs: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Strip the Ethernet header (DLT_RAW)."""
    return [(t, d[14:]) for t, d in recs]


def to_vlan(recs: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Insert an 802.1Q tag (VLAN 42) after the MAC addresses."""
    return [(t, d[:12] + b"\x81\x00\x00\x2a" + d[12:]) for t, d in recs]


def to_sll2(recs: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Replace each Ethernet header with a Linux cooked v2 header (tcpdump -i any)."""
    out = []
    for t, d in recs:
        sll2 = struct.pack(
            "!HHIHBB8s", struct.unpack("!H", d[12:14])[0], 0, 2, 1, 0, 6, d[6:12] + b"\x00\x00"
        )
        out.append((t, sll2 + d[14:]))
    return out


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    f.__name__: f
    for f in (
        reorder_two_subflows,
        subflow_loss_retransmission,
        reinjection_other_subflow,
        mapping_over_segments,
        late_mapping,
        dsn_wrap_32bit,
        v0_handshake,
        dss_checksum,
        fallback_infinite_mapping,
        ipv6_subflow,
        ipv6_initial_ipv4_join,
        both_directions_mpc_data,
        port_reuse,
        held_release_one_skb,
        many_gaps,
        signalling_options,
        noise_and_reorder,
        plain_tcp,
    )
}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in SCENARIOS.items():
        write_pcap(OUT / f"{name}.pcap", _records(make()))
    recs = _records(reorder_two_subflows())
    write_pcap(OUT / "reorder_two_subflows_ns.pcap", recs, nsec=True)
    write_pcapng(OUT / "reorder_two_subflows.pcapng", recs)
    write_pcapng(OUT / "reorder_two_subflows_obsolete_pb.pcapng", recs, obsolete=True)
    write_pcap(OUT / "reorder_two_subflows_sll2.pcap", to_sll2(recs), linktype=276)
    write_pcap(OUT / "reorder_two_subflows_snaplen64.pcap", recs, snaplen=64)
    write_pcap_big_endian(OUT / "reorder_two_subflows_be.pcap", recs)
    # Server ISNs 1500 below 2**32: both subflows' sequence numbers wrap during the data.
    wrap = _records(reorder_two_subflows(isn_s=2**32 - 1500))
    write_pcap(OUT / "reorder_two_subflows_seqwrap.pcap", wrap)
    write_pcap(OUT / "reorder_two_subflows_rawip.pcap", to_raw_ip(recs), linktype=101)
    write_pcap(OUT / "reorder_two_subflows_vlan.pcap", to_vlan(recs))
    missing = _records(reorder_two_subflows())[6:]
    write_pcap(OUT / "missing_handshake.pcap", missing)
    write_pcap(OUT / "join_without_connection_handshake.pcap", _records(reorder_two_subflows())[3:])
    back = list(recs)
    back[8], back[9] = (back[9][0], back[8][1]), (back[8][0], back[9][1])
    write_pcap(OUT / "timestamps_backwards.pcap", back)


if __name__ == "__main__":
    main()
