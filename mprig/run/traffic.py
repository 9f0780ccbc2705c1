"""Traffic: iperf3 with JSON output, and a bulk transfer of N bytes checked end to end.

iperf3 speaks MPTCP itself from 3.16 (`--mptcp`); older ones (Debian 12 has 3.12) run under
`mptcpize run`, which turns their TCP sockets into MPTCP ones. The bulk transfer is a
small Python program run on both ends with a native IPPROTO_MPTCP socket.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mprig.campaign.spec import Path, Traffic

IPERF3_PORT = 5201
BULK_PORT = 5202
CONNECT_TIMEOUT_MS = 5000
MARGIN_S = 15.0  # traffic is killed (and the attempt retried) this long after its end
MARGIN_MAX_S = 120.0  # ... at most this long over a lossy path (margin_s)
RTO_START_S = 1.0  # TCP's first retransmission timeout (RFC 6298), doubled on each loss


def has_mptcp_flag(help_text: str) -> bool:
    """Whether `iperf3 --help` lists --mptcp (iperf3 >= 3.16)."""
    return "--mptcp" in help_text


def _mptcp_prefix(mptcp: bool, native_flag: bool) -> tuple[list[str], list[str]]:
    """(prefix, extra flags) that make iperf3 use MPTCP."""
    if not mptcp:
        return [], []
    return ([], ["--mptcp"]) if native_flag else (["mptcpize", "run"], [])


def iperf3_server_argv(
    server_addr: str, logfile: str, *, mptcp: bool, native_flag: bool = False
) -> list[str]:
    """iperf3 server for one client (`-1`), JSON into `logfile`."""
    prefix, extra = _mptcp_prefix(mptcp, native_flag)
    return [
        *prefix,
        *["iperf3", "-s", "-1", "-J", "-B", server_addr, "-p", str(IPERF3_PORT)],
        *[*extra, "--logfile", logfile],
    ]


def iperf3_client_argv(
    t: Traffic,
    server_addr: str,
    bind_addr: str,
    logfile: str,
    *,
    mptcp: bool,
    native_flag: bool = False,
) -> list[str]:
    """iperf3 client bound to the initial path's address; `-R` when the server sends."""
    prefix, extra = _mptcp_prefix(mptcp, native_flag)
    argv = [*prefix, "iperf3", "-c", server_addr, "-B", bind_addr, "-p", str(IPERF3_PORT)]
    argv += ["-t", _seconds(t.duration_s, minimum=1), "-O", _seconds(t.omit_s), "-J"]
    argv += ["--connect-timeout", str(CONNECT_TIMEOUT_MS)]
    if t.direction == "download":
        argv.append("-R")
    return [*argv, *extra, "--logfile", logfile]


def timeout_s(t: Traffic, round_trip_loss: float = 0.0) -> float:
    """How long a traffic command may take before it counts as hung: its duration (a bulk
    transfer's deadline; the blocks sender's writing time; iperf3's test plus its omitted
    warm-up) and a margin for the paths' loss (margin_s)."""
    margin = margin_s(round_trip_loss)
    if t.tool in ("bulk", "blocks", "requests", "cbr"):
        return t.duration_s + margin
    return t.duration_s + t.omit_s + margin


def run_timeout_s(t: Traffic, paths: Iterable[Path]) -> float:
    """timeout_s for a run over PATHS (their worst round-trip loss): what the runner gives
    the traffic client, and run.json `timings.traffic_timeout_s`."""
    return timeout_s(t, round_trip_loss(paths))


def margin_s(round_trip_loss: float) -> float:
    """How long past its end a traffic command may take: 15 s, plus over a lossy path the
    backoff of TCP's retransmissions of the exchange that ends it (iperf3's control
    messages, a bulk transfer's last segments). A message and its answer get through with
    1 - q (ROUND_TRIP_LOSS, 0-1); k rounds in a row fail with q^k, and each failure doubles
    the wait from 1 s, so k failures cost 2^k - 1 s. The margin covers the k at which q^k
    falls under 1 %, at most 120 s. Measured in 003-scenario1-full at 100 m (q about 0.6):
    with 15 s, 4 of 17 iperf3 attempts were killed as hung and the 13 that finished took
    2-12 s past their test."""
    q = min(max(round_trip_loss, 0.0), 1.0)
    if q == 0.0:
        return MARGIN_S
    if q == 1.0:
        return MARGIN_MAX_S
    rounds = max(1, math.ceil(math.log(0.01) / math.log(q)))
    return min(MARGIN_MAX_S, MARGIN_S + RTO_START_S * float(2**rounds - 1))


def round_trip_loss(paths: Iterable[Path]) -> float:
    """The worst of the PATHS' chance that a message or its answer is lost (0-1), each path
    with the Wi-Fi model applied (its distance's residual loss) and a Gilbert-Elliott
    chain's long-run loss counted."""
    from mprig.campaign import netemspec, wifi

    worst = 0.0
    for path in paths:
        p = wifi.effective_path(path)
        kept = 1.0
        for d in (p.down, p.up):
            kept *= 1.0 - min(100.0, d.loss_pct + netemspec.ge_mean_loss_pct(d)) / 100.0
        worst = max(worst, 1.0 - kept)
    return worst


def load_window(t: Traffic, client_s: float, end: float) -> tuple[float, float]:
    """The traffic's window [start, end] (wall clock, s), over which latency probes and
    competing flows are measured: it ends with the client's command and spans the time the
    tool sends for (iperf3's test with its omitted warm-up; the blocks and cbr senders'
    duration), not the client's start-up and connection set-up before it, which under
    emulation took over a second and put unloaded probe samples into the latency under
    load. A bulk transfer and requests end when their work is done: the whole command."""
    sending = {"iperf3": t.duration_s + t.omit_s, "blocks": t.duration_s, "cbr": t.duration_s}
    return end - min(client_s, sending.get(t.tool, client_s)), end


def _seconds(value: float, minimum: int = 0) -> str:
    """Whole seconds for iperf3, which reads -t and -O with atoi (0.5 -> 0, and -t 0 runs
    forever): rounded up, never below `minimum`. The spec allows whole seconds only."""
    return str(max(minimum, math.ceil(value)))


# The bulk transfer, run as `python3 -c BULK_SCRIPT ROLE ADDR PORT NBYTES SEED MPTCP MODE OUT`.
# ROLE listen|connect, MODE send|recv. The sender streams a seeded pseudo-random payload;
# both ends hash what they sent or received and write {bytes, sha256, seconds} to OUT.
BULK_SCRIPT = r"""
import hashlib, json, random, socket, sys, time
role, addr, port, nbytes, seed, mptcp, mode, out = sys.argv[1:9]
port, nbytes, seed = int(port), int(nbytes), int(seed)
proto = 262 if mptcp == "1" else 0
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
if role == "listen":
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(1); print("listening", flush=True)
    conn, _ = s.accept()
else:
    bind = sys.argv[9] if len(sys.argv) > 9 else ""
    if bind:
        s.bind((bind, 0))
    s.settimeout(10); s.connect((addr, port)); s.settimeout(None); conn = s
h, done, t0 = hashlib.sha256(), 0, time.monotonic()
if mode == "send":
    rng = random.Random(seed)
    while done < nbytes:
        chunk = rng.randbytes(min(1 << 16, nbytes - done))
        conn.sendall(chunk); h.update(chunk); done += len(chunk)
    conn.shutdown(socket.SHUT_WR)
    while conn.recv(1 << 16):
        pass
else:
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        h.update(chunk); done += len(chunk)
conn.close()
with open(out, "w") as f:
    json.dump({"bytes": done, "sha256": h.hexdigest(), "seconds": time.monotonic() - t0}, f)
"""


def bulk_argv(
    role: str,
    addr: str,
    nbytes: int,
    seed: int,
    *,
    mptcp: bool,
    send: bool,
    out: str,
    bind: str = "",
) -> list[str]:
    """One end of the bulk transfer (`role` listen on the server, connect on the client)."""
    argv = ["python3", "-c", BULK_SCRIPT, role, addr, str(BULK_PORT), str(nbytes), str(seed)]
    argv += ["1" if mptcp else "0", "send" if send else "recv", out]
    return [*argv, bind] if bind else argv


@dataclass(frozen=True)
class Iperf3Summary:
    """What the runner keeps from iperf3's JSON for its summary table."""

    receiver_bps: float  # end.sum_received.bits_per_second
    sender_bps: float  # end.sum_sent.bits_per_second
    retransmits: int | None  # end.sum_sent.retransmits (sender side only)
    seconds: float  # end.sum_received.seconds


def parse_iperf3(text: str) -> Iperf3Summary:
    """Summarise an iperf3 --json document; ValueError when it holds an error or no end."""
    doc: dict[str, Any] = json.loads(text)
    if doc.get("error"):
        raise ValueError(f"iperf3: {doc['error']}")
    end = doc.get("end") or {}
    recv, sent = end.get("sum_received"), end.get("sum_sent")
    if not recv or not sent:
        raise ValueError("iperf3: JSON has no end.sum_received/sum_sent (test did not finish)")
    return Iperf3Summary(
        receiver_bps=float(recv["bits_per_second"]),
        sender_bps=float(sent["bits_per_second"]),
        retransmits=sent.get("retransmits"),
        seconds=float(recv["seconds"]),
    )


def check_bulk(sent: dict[str, Any], received: dict[str, Any], nbytes: int) -> str | None:
    """Why a bulk transfer is wrong, or None when the bytes and hashes match end to end."""
    if sent["bytes"] != nbytes or received["bytes"] != nbytes:
        return f"bulk: sent {sent['bytes']} received {received['bytes']} of {nbytes} bytes"
    if sent["sha256"] != received["sha256"]:
        return "bulk: sha256 of received data differs from what was sent"
    return None


BLOCKS_PORT = 5203
BLOCKS_LOG = "blocks.jsonl"  # the receiver's per-block log, kept in the bundle as is
BLOCKS_SENT = "blocks-sent.json"  # the sender's count: {blocks, block_bytes}


def blocks_file(sends: bool) -> str:
    """What one end of the block workload writes: the sender its count, the receiver its
    per-block log (both keep the name in the bundle)."""
    return BLOCKS_SENT if sends else BLOCKS_LOG


# The block workload (paper 004 Fig. 7: application-level delay of 8 KB blocks), run as
# `python3 -c BLOCKS_SCRIPT ROLE ADDR PORT BLOCK_BYTES INTERVAL_MS DURATION_S MPTCP MODE OUT
# [BIND]`. The sender writes fixed-size blocks (back to back when INTERVAL_MS is 0), each
# starting with its number and the wall-clock time it was handed to the socket (8 + 8 bytes,
# network order); the receiver reads whole blocks and writes one JSON line per block to OUT:
# {seq, sent_ns, recv_ns}. Sender and receiver share a clock (namespaces on one machine, or
# hosts synchronised by PTP/NTP, whose offset then adds to every delay).
BLOCKS_SCRIPT = r"""
import json, socket, struct, sys, time
role, addr, port, size, gap_ms, secs, mptcp, mode, out = sys.argv[1:10]
port, size, gap, secs = int(port), int(size), float(gap_ms) / 1000, float(secs)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262 if mptcp == "1" else 0)
if role == "listen":
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(1); print("listening", flush=True)
    conn, _ = s.accept()
else:
    if len(sys.argv) > 10 and sys.argv[10]:
        s.bind((sys.argv[10], 0))
    s.settimeout(10); s.connect((addr, port)); s.settimeout(None); conn = s
with open(out, "w") as f:
    if mode == "send":
        pad, seq, end = bytes(size - 16), 0, time.monotonic() + secs
        while time.monotonic() < end:
            conn.sendall(struct.pack("!QQ", seq, time.time_ns()) + pad)
            seq += 1
            if gap:
                time.sleep(gap)
        conn.shutdown(socket.SHUT_WR)
        while conn.recv(1 << 16):
            pass
        json.dump({"blocks": seq, "block_bytes": size}, f)
    else:
        buf = b""
        while True:
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
            now = time.time_ns()
            while len(buf) >= size:
                seq, sent = struct.unpack("!QQ", buf[:16])
                f.write(json.dumps({"seq": seq, "sent_ns": sent, "recv_ns": now}) + "\n")
                buf = buf[size:]
conn.close()
"""


def blocks_argv(
    role: str,
    addr: str,
    *,
    block_bytes: int,
    interval_ms: float,
    duration_s: float,
    mptcp: bool,
    send: bool,
    out: str,
    bind: str = "",
) -> list[str]:
    """One end of the block workload (`role` listen on the server, connect on the client)."""
    argv = ["python3", "-c", BLOCKS_SCRIPT, role, addr, str(BLOCKS_PORT), str(block_bytes)]
    argv += [f"{interval_ms:g}", f"{duration_s:g}", "1" if mptcp else "0"]
    argv += ["send" if send else "recv", out]
    return [*argv, bind] if bind else argv


@dataclass(frozen=True)
class BlockDelays:
    """Application-level delay of the blocks a receiver logged (paper 004 Fig. 7)."""

    n: int  # blocks received
    missing: int  # block numbers absent below the highest seen or sent (0 on a good run)
    p50_ms: float  # median send-to-receive delay of a whole block
    p95_ms: float
    p99_ms: float
    max_ms: float
    span_s: float  # first block's send to last block's arrival


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted list."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def parse_blocks(text: str, sent: int | None = None) -> BlockDelays:
    """Summarise a receiver's blocks JSONL; ValueError when it holds no block.

    Args:
        sent: the blocks the sender wrote, when known: blocks missing after the last one
            received count too.
    """
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not rows:
        raise ValueError("blocks: the receiver logged no block")
    delays = sorted((r["recv_ns"] - r["sent_ns"]) / 1e6 for r in rows)
    seqs = {int(r["seq"]) for r in rows}
    return BlockDelays(
        n=len(rows),
        missing=max(max(seqs) + 1, sent or 0) - len(seqs),
        p50_ms=_quantile(delays, 0.50),
        p95_ms=_quantile(delays, 0.95),
        p99_ms=_quantile(delays, 0.99),
        max_ms=delays[-1],
        span_s=(max(r["recv_ns"] for r in rows) - min(r["sent_ns"] for r in rows)) / 1e9,
    )
