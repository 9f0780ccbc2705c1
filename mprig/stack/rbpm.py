"""RBPM, paper 002's receive-buffer-based path management, as a controller on the client.

Standard library only: the runner sends this file to the client as `python3 -c <this file>
ARGS`, with the modules it imports inlined (mprig.run.rbpm_run.source(): rbpm_policy.py, the
algorithm, and rbpm_ss.py, reading ss), so a lab client needs Python but not mprig. It also
runs as `python -m mprig.stack.rbpm ARGS`. See docs/rbpm.md.

Every interval the controller reads the MPTCP connection with `ss -tinHMm`, estimates the
receive buffer the active subflows need (the paper's Eq. 2-4), and while that exceeds the
free receive buffer it marks the worst active subflow (max-min score, Eq. 5) backup with
`ip mptcp endpoint change id N backup` (MP_PRIO to the peer); when the free buffer exceeds
twice what all subflows would need, it clears every flag it set. One JSON line per step.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from mprig.stack.rbpm_policy import Decision, Subflow, decide  # inlined by rbpm_run.source()
from mprig.stack.rbpm_ss import (  # inlined by rbpm_run.source()
    SsSocket,
    connection,
    last_sample,
    parse_endpoints,
    parse_ss,
    sender_subflows,
    skmem,
    ss_float,
    ss_int,
)

# -- estimation (state across samples) --------------------------------------------------


@dataclass
class Estimator:
    """Per subflow: the paper's inputs from successive ss samples.

    receiver role (the client receives, download): BW_i is the subflow's highest receive
    rate (over `window` seconds) of the last `peak` seconds, o_i = BW_i x RTT_i / MSS what
    it delivers in one RTT, RTT_i ss's rcv_rtt (the receiver's estimate, queueing
    included); free is the MPTCP
    socket's receive buffer minus the memory in use (rb - r), in kernel memory, times the
    payload/memory ratio (payload_ratio), so it counts payload like Eq. 3. sender role
    (upload): o_i is cwnd, RTT_i the smoothed RTT, BW_i cwnd x MSS / RTT, free the peer's
    advertised window (snd_wnd: MPTCP advertises its connection-level window on every subflow).
    A subflow counts once it has been seen for `window` seconds (and, receiving, has an
    rcv_rtt). A stopped subflow keeps the values it had when stopped (it carries no data).
    """

    role: str
    window: float = 1.0  # seconds of byte counts behind a rate
    peak: float = 5.0  # seconds over which the highest rate counts (receiver)
    history: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    rates: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)
    last: dict[str, Subflow] = field(default_factory=dict)

    def subflows(
        self,
        now: float,
        subs: Sequence[SsSocket],
        stopped: set[str],
        sender: dict[str, SsSocket] | None = None,
    ) -> list[Subflow]:
        """The subflows the algorithm sees; `sender` (the receiver role in a download):
        the sender's sockets by subflow key, whose srtt and cwnd replace the receiver's
        estimates (sender_subflows)."""
        out = []
        for s in subs:
            key = f"{s.addr}:{s.port}"
            fresh = self._measure(now, key, s, None if sender is None else sender.get(key))
            if sender is not None and key not in sender:
                fresh = None  # the sender does not show this subflow (yet)
            if key in stopped and key in self.last:
                out.append(replace(self.last[key], active=False))
            elif fresh is not None:
                self.last[key] = fresh
                out.append(replace(fresh, active=key not in stopped))
        return out

    def _measure(self, now: float, key: str, s: SsSocket, tx: SsSocket | None) -> Subflow | None:
        mss = ss_int(s, "mss") or 1448
        rate = self._rate(now, key, ss_int(s, "bytes_received"))
        if rate is None:
            return None
        if self.role == "sender" or tx is not None:
            tx = tx or s
            mss = ss_int(tx, "mss") or mss
            rtt, pkts = ss_float(tx, "rtt"), float(ss_int(tx, "cwnd"))
            bw = pkts * mss / (rtt / 1000) if rtt > 0 else 0.0
        else:
            rtt = ss_float(s, "rcv_rtt")
            bw = self._peak(now, key, rate)
            pkts = bw * rtt / 1000 / mss
        return Subflow(key, s.addr, rtt, mss, pkts, bw) if rtt > 0 else None

    def _peak(self, now: float, key: str, rate: float) -> float:
        """The highest rate of the last `peak` seconds: what the subflow can deliver (the
        paper's cwnd), not what it delivers while the buffer blocks it."""
        h = self.rates.setdefault(key, deque())
        h.append((now, rate))
        while now - h[0][0] > self.peak:
            h.popleft()
        return max(r for _, r in h)

    def _rate(self, now: float, key: str, received: int) -> float | None:
        """Bytes/s over the last `window` seconds; None until the subflow has been seen that
        long (a young subflow's rate and RTT are noise, and a decision on them is wrong)."""
        h = self.history.setdefault(key, deque())
        h.append((now, received))
        while len(h) > 2 and now - h[1][0] >= self.window:
            h.popleft()
        (t0, b0), (t1, b1) = h[0], h[-1]
        return (b1 - b0) / (t1 - t0) if t1 - t0 >= self.window else None


def payload_ratio(subs: Sequence[SsSocket]) -> float:
    """Payload bytes per byte of receive memory: the kernel's scaling ratio, read as the
    largest rcv_ssthresh / rb of the subflows (a grown window reaches rb x ratio); 0.5, the
    kernel's initial ratio, when no subflow shows one."""
    ratios = [ss_int(s, "rcv_ssthresh") / skmem(s)["rb"] for s in subs if skmem(s).get("rb", 0) > 0]
    return min(1.0, max(ratios, default=0.0)) or 0.5


def free_bytes(role: str, conn: SsSocket, subs: Sequence[SsSocket]) -> float:
    """The free receive buffer in payload bytes, the unit of Eq. 3 (see Estimator)."""
    if role == "sender":
        return float(max((ss_int(s, "snd_wnd") for s in subs), default=0))
    mem = skmem(conn)
    return (mem.get("rb", 0) - mem.get("r", 0)) * payload_ratio(subs)


# -- the controller (I/O) ---------------------------------------------------------------

Runner = Callable[[list[str]], str]


def read_tail(path: str, size: int = 65536) -> str:
    """The last `size` bytes of a file (the sampler's newest samples); "" if it is missing."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def run_argv(argv: list[str]) -> str:
    """Run a command (argv list, no shell); its stdout; CalledProcessError on failure."""
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=5)
    return done.stdout


@dataclass
class Controller:
    """Reads ss, decides, marks endpoints, logs one JSON line per step."""

    role: str
    port: int
    log: TextIO
    run: Runner = run_argv
    window: float = 1.0
    hold: float = 1.0  # seconds a stop lasts at least
    sender_ss: str | None = None  # the sender's ss sampler output (a download's inputs)
    stale: float = 1.0  # seconds after which a sender sample is too old to act on
    read: Callable[[str], str] = read_tail
    marked: dict[str, int] = field(default_factory=dict)  # subflow key -> endpoint id
    stopped_at: dict[str, float] = field(default_factory=dict)  # subflow key -> when
    est: Estimator = field(init=False)

    def __post_init__(self) -> None:
        self.est = Estimator(self.role, self.window)

    def ss_argv(self) -> list[str]:
        return ["ss", "-tinHMm", f"( sport = :{self.port} or dport = :{self.port} )"]

    def step(self, now: float) -> None:
        conn, subs = connection(parse_ss(self.run(self.ss_argv())))
        if conn is None or not subs:
            return
        tx = self._sender(now)
        if self.sender_ss is not None and tx is None:
            return
        flows = self.est.subflows(now, subs, set(self.marked), tx)
        if not flows:
            return
        d = decide(flows, free_bytes(self.role, conn, subs), self._may_enable(now, flows))
        endpoints = self._act(now, d, flows) if d.action != "none" else {}
        flags = {f"{s.addr}:{s.port}": s.info.get("flags", "") for s in subs}
        record = _decision_record(d, flows, endpoints, skmem(conn), flags)
        record["inputs"] = "receiver" if tx is None and self.role == "receiver" else "sender"
        self.write(now, "step", decision=record)

    def _sender(self, now: float) -> dict[str, SsSocket] | None:
        """The sender's subflows from its sampler's newest complete sample; None (logged)
        when there is none younger than `stale` seconds: acting on the receiver's own
        estimates instead would be wrong (docs/rbpm.md)."""
        if self.sender_ss is None:
            return None
        sample = last_sample(self.read(self.sender_ss))
        if sample is None or now - sample[0] > self.stale:
            age = None if sample is None else round(now - sample[0], 3)
            self.write(now, "no_sender_sample", path=self.sender_ss, age_s=age)
            return None
        return sender_subflows(sample[1])

    def _may_enable(self, now: float, flows: Sequence[Subflow]) -> bool:
        """Hold every stop for `hold` seconds and two of the subflow's RTTs: its packets
        still in flight keep blocking the buffer just after it stops, and the fast
        subflows' momentary slowness must not re-enable it at once."""
        rtts = {f.key: f.rtt_ms / 1000 for f in flows}
        return all(
            now - t >= max(self.hold, 2 * rtts.get(key, 0.0)) for key, t in self.stopped_at.items()
        )

    def _act(self, now: float, d: Decision, flows: Sequence[Subflow]) -> dict[str, int]:
        addrs = {f.key: f.addr for f in flows}
        eps = parse_endpoints(self.run(["ip", "mptcp", "endpoint", "show"]))
        done = {}
        for key in d.targets:
            eid = eps.get(addrs[key], (None, False))[0]
            if eid is None:
                continue  # no endpoint for this address: nothing RBPM can mark
            self.run(["ip", "mptcp", "endpoint", "change", "id", str(eid), d.action])
            done[key] = eid
            if d.action == "backup":
                self.marked[key], self.stopped_at[key] = eid, now
            else:
                self.marked.pop(key, None)
                self.stopped_at.pop(key, None)
        return done

    def restore(self) -> None:
        """Clear every backup flag this controller set (at exit or after an error)."""
        for eid in sorted(set(self.marked.values())):
            self.run(["ip", "mptcp", "endpoint", "change", "id", str(eid), "nobackup"])
        self.marked.clear()
        self.stopped_at.clear()

    def write(self, now: float, event: str, **fields: Any) -> None:
        self.log.write(json.dumps({"t": round(now, 3), "event": event, **fields}) + "\n")
        self.log.flush()


def _decision_record(
    d: Decision,
    flows: Sequence[Subflow],
    endpoints: dict[str, int],
    mem: dict[str, int],
    flags: dict[str, str],
) -> dict[str, Any]:
    """One step's inputs, outputs and what was done (see docs/bundle.md, rbpm.jsonl)."""
    # rtt and o_i to 6 decimals: with RTTs 150 times apart Eq. 2 counts a fast subflow's o_i
    # 150 times, so the logged inputs give back the logged requirement only at this precision
    subflows = [
        {"key": f.key, "addr": f.addr, "rtt_ms": round(f.rtt_ms, 6), "mss": f.mss,
         "pkts": round(f.pkts, 6), "bw_Bps": round(f.bw), "active": f.active,
         "score": round(d.scores[f.key], 4), "flags": flags.get(f.key, "")}
        for f in flows
    ]  # fmt: skip
    return {
        "action": d.action, "targets": list(d.targets), "endpoints": endpoints,
        "required": round(d.required), "required_all": round(d.required_all),
        "free": round(d.free), "skmem": mem, "subflows": subflows,
    }  # fmt: skip


# -- command line -----------------------------------------------------------------------

EPILOG = """\
examples:
  python -m mprig.stack.rbpm --port 5201 --log /tmp/rbpm.jsonl --sender-ss /tmp/server-ss.txt
  python -m mprig.stack.rbpm --port 5201 --role sender --interval 0.2 --log rbpm.jsonl

Runs until SIGINT/SIGTERM, then clears every backup flag it set. The runner starts it on
the client when a variant has path_manager: rbpm (docs/rbpm.md).
"""


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="mprig.stack.rbpm",
        description="RBPM (paper 002) controller: mark the worst MPTCP subflow backup while "
        "the receive buffer cannot hold what the subflows need.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--port", type=int, required=True, help="the traffic's server port")
    p.add_argument("--log", required=True, help="JSON lines file (appended)")
    p.add_argument("--role", choices=["receiver", "sender"], default="receiver")
    p.add_argument("--interval", type=float, default=0.1, help="seconds between steps")
    p.add_argument("--window", type=float, default=1.0, help="seconds behind a receive rate")
    p.add_argument("--hold", type=float, default=1.0, help="seconds a stop lasts at least")
    p.add_argument(
        "--sender-ss",
        help="the sender's ss sampler output (`# <time>` then `ss -tinHM`): RTT and cwnd "
        "come from the sender's subflows (receiver role)",
    )
    return p.parse_args(argv)


def serve(c: Controller, interval: float) -> None:
    """Step until a signal; on any error log it, clear the flags and stay idle (a run never
    fails because of the controller)."""
    stop: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda n, _f: stop.append(n))
    c.write(time.time(), "start", role=c.role, port=c.port, interval=interval)
    acting = True
    while not stop:
        try:
            if acting:
                c.step(time.time())
        except Exception as e:  # logged; the run goes on without RBPM
            if stop:
                break  # the runner signals the process group: ss died of the same signal
            c.write(time.time(), "error", error=f"{type(e).__name__}: {e}"[:500])
            acting = False
            _restore_quietly(c)
        time.sleep(interval)
    _restore_quietly(c)
    c.write(time.time(), "stop", signal=stop[0])


def _restore_quietly(c: Controller) -> None:
    try:
        c.restore()
    except Exception as e:
        c.write(time.time(), "error", error=f"restore: {type(e).__name__}: {e}"[:500])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with open(args.log, "a") as log:
        c = Controller(
            args.role, args.port, log, window=args.window, hold=args.hold,
            sender_ss=args.sender_ss,
        )  # fmt: skip
        serve(c, args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
