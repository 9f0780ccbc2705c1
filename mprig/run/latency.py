"""Latency under load (issue 18 parts 4 and 5): an ICMP probe from the client over every
path during the run, as Flent's RRUL pings beside its bulk flows, and the one-way delays
where the clocks allow.

`traffic.ping_interval_ms` starts one probe per path on the client, from the path's own
address (policy routing sends it over that path), to the server. It runs from set-up to
the stop stage; each probe logs one JSON line per probe sent (`{"seq", "sent"}`:
wall-clock seconds) and per reply (`{"seq", "rtt_ms", "up_ms", "down_ms"}`) into
`ping-<path>.jsonl`. The runner keeps the probes sent while the traffic ran (its own wall
clock: one clock on the virtual rig; on a lab rig the client's must be synchronised, NTP's
milliseconds do not matter against seconds of traffic) and summarises them per path: RTT
and one-way delay p50/p95/p99 (nearest rank) and loss. An `Echo` is one probe.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mprig.campaign.plan import Run
from mprig.campaign.spec import Traffic
from mprig.rig.host import PathLink

# A constant script (no campaign value reaches a shell: the addresses and the interval are
# argv). Raw ICMP (root), not a datagram ICMP socket: a fresh network namespace's
# ping_group_range admits no group. Each probe is an ICMP timestamp request (type 13),
# which every Linux host answers in the kernel: the reply gives the RTT (the client's
# monotonic clock) and, from the server's receive and transmit stamps (ms since midnight
# UTC, RFC 792), the one-way delays where the two clocks agree. Replies are matched by
# identifier (the pid) and 16-bit sequence number, read from a socket bound to the path's
# address.
PROBE_SCRIPT = r"""
import json, os, select, socket, struct, sys, time
src, dst, every = sys.argv[1], sys.argv[2], float(sys.argv[3]) / 1000
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.bind((src, 0))
ident, DAY = os.getpid() & 0xFFFF, 86400000
def csum(b):
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    t = (t >> 16) + (t & 0xFFFF)
    return ~(t + (t >> 16)) & 0xFFFF
def ms():
    return int(time.time() * 1000) % DAY
def diff(a, b):
    d = (a - b) % DAY
    return d - DAY if d > DAY // 2 else d
def out(doc):
    print(json.dumps(doc), flush=True)
sent, seq, due = {}, 0, time.monotonic()
while True:
    now = time.monotonic()
    if now >= due:
        seq += 1
        msg = struct.pack("!BBHHHIII", 13, 0, 0, ident, seq & 0xFFFF, ms(), 0, 0)
        sent[seq & 0xFFFF] = (seq, time.monotonic())
        s.sendto(msg[:2] + struct.pack("!H", csum(msg)) + msg[4:], (dst, 0))
        out({"seq": seq, "sent": round(time.time(), 6)})
        due += every
        continue
    if not select.select([s], [], [], due - now)[0]:
        continue
    data = s.recv(2048)
    arrived, t = ms(), time.monotonic()
    icmp = data[(data[0] & 15) * 4:]
    if len(icmp) < 20 or icmp[0] != 14:
        continue
    got, n16, orig, recv, xmit = struct.unpack("!HHIII", icmp[4:20])
    if got == ident and n16 in sent:
        n, t0 = sent.pop(n16)
        doc = {"seq": n, "rtt_ms": round((t - t0) * 1000, 3)}
        out({**doc, "up_ms": diff(recv, orig), "down_ms": diff(arrived, xmit)})
"""
LOG = "ping-{path}.jsonl"  # one file per path, in the client's remote directory and the bundle
HOST = "client"  # where the probes run (from each path's client address)


def log_name(path: str) -> str:
    """The probe log of one path."""
    return LOG.format(path=path)


def ready_logs(run: Run, remote_dir: Callable[[str], str]) -> list[tuple[str, str]]:
    """(host, file) of every probe's log: the runner waits for its first line before the
    traffic starts, or a slow start leaves the run's first seconds unprobed (under busy
    emulation a cold Python takes seconds)."""
    names = files(run.traffic, [p.name for p in run.paths])
    return [(HOST, f"{remote_dir(HOST)}/{name}") for name in names]


def probe_argv(src: str, dst: str, interval_ms: float) -> list[str]:
    """One path's probe: ICMP timestamp requests from `src` to `dst` every `interval_ms`."""
    return ["python3", "-c", PROBE_SCRIPT, src, dst, f"{interval_ms:g}"]


def background(
    traffic: Traffic, links: Sequence[PathLink], server_addr: str
) -> list[tuple[str, list[str], str]]:
    """(host, argv, log name) of every path's probe, for commands.RunCommands.background."""
    if traffic.ping_interval_ms is None:
        return []
    every = traffic.ping_interval_ms
    return [(HOST, probe_argv(k.client_addr, server_addr, every), log_name(k.name)) for k in links]


def files(traffic: Traffic, paths: Sequence[str]) -> list[str]:
    """The client's probe logs that become artifacts (`paths`: the run's path names)."""
    return [log_name(p) for p in paths] if traffic.ping_interval_ms is not None else []


def shown(argv: list[str]) -> list[str]:
    """A probe's argv for people (`mprig plan --commands`): its source as a name."""
    return ["latency-probe.py" if a == PROBE_SCRIPT else a for a in argv]


def run_summary(staging: Path, run: Run, window: tuple[float, float]) -> dict[str, Any]:
    """run.json `summary.latency`: per path, `summarise` over its probe log in the bundle
    (`{"error": ...}` for a log that is missing or unreadable), and `latency_window`, the
    traffic's [start, end] (wall clock, s) it kept; {} without a probe."""
    out: dict[str, Any] = {}
    for name in files(run.traffic, [p.name for p in run.paths]):
        path = name.removeprefix("ping-").removesuffix(".jsonl")
        try:
            out[path] = summarise(parse((staging / name).read_text()), window)
        except (OSError, ValueError) as e:
            out[path] = {"error": f"{name}: {e}"}
    return {"latency": out, "latency_window": [round(t, 6) for t in window]} if out else {}


@dataclass(frozen=True)
class Echo:
    """One probe the probe sent (an ICMP timestamp request and its reply)."""

    seq: int
    sent: float  # wall clock, s
    rtt_ms: float | None  # None: no reply logged
    up_ms: float | None = None  # one-way client -> server, whole ms (server's stamp - ours)
    down_ms: float | None = None  # one-way server -> client, whole ms


def parse(text: str) -> list[Echo]:
    """A probe log -> its echoes in order; a line cut off when the probe was stopped is
    skipped, any other bad line is a ValueError naming it."""
    sent: dict[int, float] = {}
    replies: dict[int, tuple[float, float | None, float | None]] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        try:
            doc = json.loads(line)
            if "rtt_ms" in doc:
                replies[int(doc["seq"])] = (float(doc["rtt_ms"]), *_one_way(doc))
            else:
                sent[int(doc["seq"])] = float(doc["sent"])
        except (ValueError, KeyError, TypeError) as e:
            if number == len(lines) and not text.endswith("\n"):
                break
            raise ValueError(f"line {number}: not a probe record ({e})") from None
    none = (None, None, None)
    return [Echo(n, t, *replies.get(n, none)) for n, t in sorted(sent.items())]


def _one_way(doc: dict[str, Any]) -> tuple[float | None, float | None]:
    """A reply's one-way delays (None where a log line has none)."""
    up, down = doc.get("up_ms"), doc.get("down_ms")
    return (None if up is None else float(up)), (None if down is None else float(down))


def quantile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of a sorted sequence (as traffic.parse_blocks)."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summarise(echoes: Sequence[Echo], window: tuple[float, float]) -> dict[str, Any]:
    """The echoes sent within `window` (wall clock, s): how many, how many lost, and the
    quantiles of the answered ones' RTT and one-way delays (`up_`, `down_`; None without
    any)."""
    inside = [e for e in echoes if window[0] <= e.sent <= window[1]]
    rtts = sorted(e.rtt_ms for e in inside if e.rtt_ms is not None)
    lost = len(inside) - len(rtts)
    out: dict[str, Any] = {"sent": len(inside), "lost": lost}
    out["loss_pct"] = round(100 * lost / len(inside), 3) if inside else None
    for key, values in (("rtt", rtts), *_one_ways(inside)):
        for name, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
            out[f"{key}_{name}_ms"] = quantile(values, q) if values else None
    return out


def _one_ways(echoes: Sequence[Echo]) -> list[tuple[str, list[float]]]:
    """("up"/"down", the sorted one-way delays) of the answered echoes."""
    ups = sorted(e.up_ms for e in echoes if e.up_ms is not None)
    downs = sorted(e.down_ms for e in echoes if e.down_ms is not None)
    return [("up", ups), ("down", downs)]
