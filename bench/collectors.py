"""Collector speed and memory against peers, on a >= 1 M packet two-path MPTCP capture.

    .venv/bin/python -m bench.collectors [--packets 1050000] [--peer-packets 100000]

The capture is synthesised once with vectorised packing (cached in bench/out/): a bulk
download over two subflows (fast path 10 ms, slow path 40 ms one-way) with DSS mappings
(8-byte DSNs), client ACKs carrying DATA_ACKs, 0.1 % subflow losses retransmitted one RTT
later, and the connection-level reordering that the delay difference causes. Frames are cut
at a 200-byte snaplen as mprig's captures are.

In the same run it measures: `mprig analyze --json` end to end (packets/s and the child's
peak RSS), tshark extracting the DSS fields, and scapy's RawPcapReader with a struct decode;
peers run on the first --peer-packets packets of the same file (their rate does not depend
on the file length) to keep the benchmark short. Prints the ratios and whether the targets
hold: >= 1 M packets/s, >= 10x tshark, peak RSS <= 300 MB.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

OUT = Path(__file__).resolve().parent / "out"
KEY_C, KEY_S = 0x1111_2222_3333_4444, 0xAAAA_BBBB_CCCC_DDDD
MSS = 1400
SNAPLEN = 200
EPOCH = 1_700_000_000
ISN_C, ISN_S = 1000, 50000
# Frame layout of every packet: Ethernet 14, IPv4 20, TCP 20 + options 28 (DSS with 8-byte
# DATA_ACK and mapping, 2 NOPs) = 82 header bytes.
HDR = 82
TCP_OFF = 34
DSS_OFF = TCP_OFF + 20 + 2  # after two NOPs


def idsn(key: int) -> int:
    return int.from_bytes(hashlib.sha256(key.to_bytes(8, "big")).digest()[-8:], "big")


def token(key: int) -> int:
    return int.from_bytes(hashlib.sha256(key.to_bytes(8, "big")).digest()[:4], "big")


def template(src: str, dst: str, sport: int, dport: int, flags: int) -> bytes:
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        0,
        0,
        0x4000,
        64,
        6,
        0,
        bytes(map(int, src.split("."))),
        bytes(map(int, dst.split("."))),
    )
    dss = bytes([30, 26, 0x20, 0x0F]) + b"\x00" * 22  # A, a (8-byte ack), M, m (8-byte DSN)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 0, 0, (48 // 4) << 4, flags, 65535, 0, 0)
    return (
        b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + tcp + b"\x01\x01" + dss
    )


def handshake() -> list[bytes]:
    """MP_CAPABLE (v1) on subflow 0 and MP_JOIN on subflow 1, as scapy builds them."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    def p(src: str, dst: str, sp: int, dp: int, fl: str, seq: int, ack: int, opt: bytes) -> bytes:
        return bytes(
            Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IP(src=src, dst=dst)
            / TCP(sport=sp, dport=dp, flags=fl, seq=seq, ack=ack, options=[(30, opt)])
        )

    def k(v: int) -> bytes:
        return v.to_bytes(8, "big")

    c1, c2, s = "10.0.1.2", "10.0.2.2", "10.0.0.1"
    tok = struct.pack("!I", token(KEY_S))
    return [
        p(c1, s, 40001, 5201, "S", ISN_C, 0, b"\x01\x01"),
        p(s, c1, 5201, 40001, "SA", ISN_S, ISN_C + 1, b"\x01\x01" + k(KEY_S)),
        p(c1, s, 40001, 5201, "A", ISN_C + 1, ISN_S + 1, b"\x01\x01" + k(KEY_C) + k(KEY_S)),
        p(c2, s, 40002, 5201, "S", ISN_C, 0, b"\x10\x01" + tok + b"\x00" * 4),
        p(s, c2, 5201, 40002, "SA", ISN_S, ISN_C + 1, b"\x10\x01" + b"\x00" * 12),
        p(c2, s, 40002, 5201, "A", ISN_C + 1, ISN_S + 1, b"\x10\x00" + b"\x00" * 20),
    ]


def schedule(n_data: int, rng: np.random.Generator) -> dict[str, npt.NDArray[np.generic]]:
    """Data segments: subflow, DSN offset, subflow offset and arrival time, with losses."""
    sf = (np.arange(n_data) % 3 == 2).astype(np.int64)  # 2/3 on the fast path
    dsn_off = np.arange(n_data, dtype=np.uint64) * MSS
    ssn_off = np.zeros(n_data, dtype=np.uint64)
    for k in (0, 1):
        m = sf == k
        ssn_off[m] = np.arange(m.sum(), dtype=np.uint64) * MSS
    send = np.arange(n_data) * (MSS * 8 / 300e6)  # 300 Mbit/s aggregate sending rate
    arrive = send + np.where(sf == 0, 0.010, 0.040) + rng.exponential(0.0005, n_data)
    for k in (0, 1):  # each path is a FIFO: jitter never reorders within a subflow
        arrive[sf == k] = np.maximum.accumulate(arrive[sf == k])
    lost = rng.random(n_data) < 0.001
    retx = np.flatnonzero(lost)
    arrive_all = np.concatenate([np.where(lost, np.inf, arrive), arrive[retx] + 0.02 + 2 * 0.04])
    idx = np.concatenate([np.arange(n_data), retx])
    order = np.argsort(arrive_all, kind="stable")
    order = order[np.isfinite(arrive_all[order])]
    return {
        "sf": sf[idx][order],
        "dsn": dsn_off[idx][order],
        "ssn": ssn_off[idx][order],
        "t": arrive_all[order],
    }


def put_be(
    rows: npt.NDArray[np.uint8], off: int, values: npt.NDArray[np.generic], size: int
) -> None:
    be = values.astype(f">u{size}").view(np.uint8).reshape(-1, size)
    rows[:, off : off + size] = be


def put_le32(rows: npt.NDArray[np.uint8], off: int, values: npt.NDArray[np.generic]) -> None:
    rows[:, off : off + 4] = values.astype("<u4").view(np.uint8).reshape(-1, 4)


def records(s: dict[str, npt.NDArray[np.generic]]) -> npt.NDArray[np.uint8]:
    """Data segments interleaved with client ACKs (one per two segments)."""
    n = len(s["t"])
    is_ack = np.zeros(n + n // 2, dtype=bool)
    is_ack[2::3] = True
    seg = np.cumsum(~is_ack) - 1
    tpl = np.frombuffer(
        b"".join(
            [
                template("10.0.0.1", "10.0.1.2", 5201, 40001, 0x18),
                template("10.0.0.1", "10.0.2.2", 5201, 40002, 0x18),
                template("10.0.1.2", "10.0.0.1", 40001, 5201, 0x10),
                template("10.0.2.2", "10.0.0.1", 40002, 5201, 0x10),
            ]
        ),
        dtype=np.uint8,
    ).reshape(4, HDR)
    sf, t = s["sf"][seg], s["t"][seg]
    rows = np.zeros((len(seg), 16 + HDR), dtype=np.uint8)
    rows[:, 16:] = tpl[sf + 2 * is_ack]
    us = np.round(t * 1e6).astype(np.int64)
    put_le32(rows, 0, EPOCH + us // 1_000_000)
    put_le32(rows, 4, us % 1_000_000)
    put_le32(rows, 8, np.full(len(seg), HDR))
    put_le32(rows, 12, np.where(is_ack, HDR, HDR + MSS))
    put_be(rows, 16 + 16, np.where(is_ack, 20 + 48, 20 + 48 + MSS), 2)
    i_s1 = np.uint64((idsn(KEY_S) + 1) % 2**64)
    put_be(rows, 16 + TCP_OFF + 4, (s["ssn"][seg] + np.uint64(ISN_S + 1)) % np.uint64(2**32), 4)
    data = ~is_ack
    d = rows[data]
    put_be(d, 16 + DSS_OFF + 12, s["dsn"][seg][data] + i_s1, 8)
    put_be(d, 16 + DSS_OFF + 20, s["ssn"][seg][data] + np.uint64(1), 4)
    put_be(d, 16 + DSS_OFF + 24, np.full(len(d), MSS), 2)
    rows[data] = d
    a = rows[is_ack]
    a[:, 16 + DSS_OFF + 3] = 0x03  # ACK only: DSS with an 8-byte DATA_ACK, 12 bytes + NOPs
    a[:, 16 + DSS_OFF + 1] = 12
    a[:, 16 + DSS_OFF + 12 : 16 + DSS_OFF + 26] = 1  # NOPs after the shortened DSS
    put_be(a, 16 + DSS_OFF + 4, s["dsn"][seg][is_ack] + i_s1, 8)
    rows[is_ack] = a
    return rows


def make_capture(path: Path, n_packets: int) -> None:
    rng = np.random.default_rng(1)
    write_pcap(path, records(schedule(n_packets * 2 // 3, rng)))


def write_pcap(path: Path, rows: np.ndarray) -> None:
    """A pcap of the MPTCP handshake followed by ROWS (packed record headers and frames)."""
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, 1))
        for i, frame in enumerate(handshake()):
            cap = frame[:SNAPLEN]
            f.write(struct.pack("<IIII", EPOCH, i, len(cap), len(frame)) + cap)
        f.write(rows.tobytes())


def count_packets(path: Path) -> int:
    size, n, off = path.stat().st_size, 0, 24
    with path.open("rb") as f:
        while off + 16 <= size:
            f.seek(off + 8)
            incl = int.from_bytes(f.read(4), "little")
            off += 16 + incl
            n += 1
            if n > 10:  # the rest are fixed-size records
                return n + (size - off) // (16 + HDR)
    return n


def run_analyze(path: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of `mprig analyze --json` in a child.

    The child is pinned to one CPU; its CPU time (user + system) is what "packets/s on one
    core" means on a shared machine; the wall time is printed too."""
    mprig = Path(sys.executable).with_name("mprig")
    t0 = time.perf_counter()
    cpu = min(os.sched_getaffinity(0))
    proc = subprocess.Popen(
        [str(mprig), "analyze", str(path), "--json"],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),  # one core, as the target says
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"mprig analyze failed with status {status}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def prefix(path: Path, n: int) -> Path:
    """The first n packets of the capture as a file of their own."""
    out = path.with_name(f"{path.stem}-first{n}.pcap")
    if not out.exists():
        with path.open("rb") as f:
            head = f.read(24 + 6 * 200)
        body = path.read_bytes()
        off, k = 24, 0
        while k < n and off + 16 <= len(body):
            off += 16 + struct.unpack_from("<I", body, off + 8)[0]
            k += 1
        out.write_bytes(body[:off])
        del head
    return out


def run_tshark(path: Path) -> float:
    """CPU seconds of tshark printing the DSS fields of every packet."""
    fields = [
        "tcp.options.mptcp.rawdataseqno",
        "tcp.options.mptcp.subflowseqno",
        "tcp.options.mptcp.datalvllen",
        "tcp.seq",
        "tcp.len",
    ]
    argv = ["tshark", "-n", "-r", str(path), "-T", "fields"]
    for fld in fields:
        argv += ["-e", fld]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"tshark failed with status {status}")
    return usage.ru_utime + usage.ru_stime


def run_scapy(path: Path) -> float:
    """RawPcapReader plus a struct decode of IPv4/TCP/DSS, the usual Python approach."""
    from scapy.utils import RawPcapReader

    t0 = time.process_time()
    dsns = 0
    for data, _meta in RawPcapReader(str(path)):
        if len(data) < 54 or data[12:14] != b"\x08\x00" or data[23] != 6:
            continue
        ihl = (data[14] & 15) * 4
        tcp = 14 + ihl
        hl = (data[tcp + 12] >> 4) * 4
        i = tcp + 20
        while i + 1 < min(tcp + hl, len(data)):
            kind = data[i]
            if kind <= 1:
                i += 1
                continue
            olen = data[i + 1]
            if olen < 2:
                break
            if kind == 30 and data[i + 2] >> 4 == 2 and data[i + 3] & 0x04:
                off = i + 4 + (8 if data[i + 3] & 0x02 else 4 if data[i + 3] & 0x01 else 0)
                dsns += struct.unpack_from("!Q" if data[i + 3] & 0x08 else "!I", data, off)[0] & 1
            i += olen
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_050_000)
    ap.add_argument("--peer-packets", type=int, default=100_000)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"two-path-{args.packets}.pcap"
    if not path.exists():
        t0 = time.perf_counter()
        make_capture(path, args.packets)
        print(f"synthesised {path} in {time.perf_counter() - t0:.1f} s")
    n = count_packets(path)
    print(f"capture: {path} ({n} packets, {path.stat().st_size / 1e6:.0f} MB)")
    wall, cpu, rss = run_analyze(path)
    ours = n / cpu
    print(
        f"mprig analyze : {cpu:7.2f} s CPU ({wall:.2f} s wall)  {ours / 1e6:6.2f} M packets/s"
        f" per core ({n / wall / 1e6:.2f} M/s wall)  peak RSS {rss:.0f} MB"
    )
    peer = prefix(path, args.peer_packets)
    rates = {}
    if shutil.which("tshark"):
        rates["tshark"] = args.peer_packets / run_tshark(peer)
    rates["scapy"] = args.peer_packets / run_scapy(peer)
    for name, rate in rates.items():
        print(f"{name:<14}: {rate / 1e6:6.3f} M packets/s  (mprig is {ours / rate:.1f}x faster)")
    checks = {
        ">= 1 M packets/s": ours >= 1e6,
        ">= 10x tshark": "tshark" in rates and ours >= 10 * rates["tshark"],
        "peak RSS <= 300 MB": rss <= 300,
    }
    for what, ok in checks.items():
        print(f"target {what:<20} {'met' if ok else 'NOT met'}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
