"""The application workloads (traffic tools `requests` and `cbr`, issue 18): their command
lines, the files each end leaves in the bundle, and the per-run summary of those files.

Both ends run mprig/run/apps_agent.py (`python3 -c <source>`), with IPPROTO_MPTCP sockets when
the variant is mptcp. The server listens and the client connects from the initial path, as
for the other tools. requests: the client asks and logs each request's completion time
(`requests.jsonl`); the server answers and counts (`requests-served.json`). cbr: the sender
(server in a download) writes frames on a fixed schedule and counts them (`cbr-sent.json`);
the receiver logs each frame's arrival (`cbr.jsonl`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mprig.campaign.apps_spec import APP_TOOLS as TOOLS
from mprig.campaign.apps_spec import Cbr, Requests
from mprig.campaign.plan import Run

__all__ = ["TOOLS"]

REQUESTS_PORT = 5204
CBR_PORT = 5205
PORTS = {"requests": REQUESTS_PORT, "cbr": CBR_PORT}
REQUESTS_LOG = "requests.jsonl"  # the client's per-request log
REQUESTS_SERVED = "requests-served.json"  # the server's count: {requests, bytes, connections}
CBR_LOG = "cbr.jsonl"  # the receiver's per-frame log
CBR_SENT = "cbr-sent.json"  # the sender's count: {frames, sent, frame_bytes, fps}
SOURCE_NAME = "mprig/run/apps_agent.py"  # how `mprig plan --commands` shows the agent's source

Command = tuple[str, list[str]]


@cache
def source() -> str:
    """The agent's source text, sent as `python3 -c` to each end."""
    return Path(__file__).with_name("apps_agent.py").read_text()


def shown(command: Command) -> Command:
    """A command for people (`mprig plan --commands`): the agent's source as its name."""
    host, argv = command
    return host, [SOURCE_NAME if a == source() else a for a in argv]


def remote_name(tool: str, sends: bool) -> str | None:
    """The file one end of an app workload writes (kept under this name in the bundle), or
    None for the other tools."""
    names = {"requests": (REQUESTS_LOG, REQUESTS_SERVED), "cbr": (CBR_LOG, CBR_SENT)}
    return names[tool][sends] if tool in names else None


def agent_config(run: Run) -> dict[str, Any]:
    """The agent's CONFIG: the tool's keys, the run's seed and duration_s."""
    t = run.traffic
    if t.tool == "requests" and t.requests is not None:
        return _requests_config(t.requests, run.workload_seed, t.duration_s)
    if t.tool == "cbr" and t.cbr is not None:
        return _cbr_config(t.cbr, t.duration_s)
    raise ValueError(f"traffic: tool {t.tool} needs its `{t.tool}:` mapping")


def _requests_config(r: Requests, seed: int, duration_s: float) -> dict[str, Any]:
    return {
        "count": r.count,
        "request_bytes": r.request_bytes,
        "think_ms": r.think_ms,
        "connection": r.connection,
        "response": r.response.keys(),
        "seed": seed,
        "duration_s": duration_s,
    }


def _cbr_config(c: Cbr, duration_s: float) -> dict[str, Any]:
    return {
        "frame_bytes": c.frame_size(),
        "fps": c.frames_per_s(),
        "frames": c.frames(duration_s),
        "duration_s": duration_s,
        "deadline_ms": c.deadline_ms,
    }


def agent_argv(
    mode: str, role: str, addr: str, *, mptcp: bool, out: str, cfg: dict[str, Any], bind: str = ""
) -> list[str]:
    """One end: `python3 -c <agent> MODE ROLE ADDR PORT MPTCP OUT CONFIG [BIND]`."""
    port = PORTS[mode.split("-")[0]]
    cfg_json = json.dumps(cfg, sort_keys=True, separators=(",", ":"))
    argv = ["python3", "-c", source(), mode, role, addr, str(port), "1" if mptcp else "0", out]
    return [*argv, cfg_json, bind] if bind else [*argv, cfg_json]


def commands(
    run: Run, server_addr: str, bind: str, dirs: tuple[str, str]
) -> tuple[Command, Command]:
    """(server, client) of an app workload; `dirs`: the server's and client's remote dirs."""
    t, cfg, mptcp = run.traffic, agent_config(run), run.variant.protocol == "mptcp"
    down = t.direction == "download"
    if t.tool == "requests":
        modes = ("requests-server", "requests-client")
    else:
        modes = ("cbr-send", "cbr-recv") if down else ("cbr-recv", "cbr-send")
    sends = (down, not down)
    server = agent_argv(modes[0], "listen", server_addr, mptcp=mptcp, cfg=cfg,
                        out=f"{dirs[0]}/{remote_name(t.tool, sends[0])}")  # fmt: skip
    client = agent_argv(modes[1], "connect", server_addr, mptcp=mptcp, cfg=cfg, bind=bind,
                        out=f"{dirs[1]}/{remote_name(t.tool, sends[1])}")  # fmt: skip
    return ("server", server), ("client", client)


def quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted list (as traffic.parse_blocks)."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class RequestTimes:
    """Completion times of the requests a client logged."""

    n: int  # requests logged (every request of `count`, completed or not)
    completed: int
    failures: int  # requests that failed or were not sent before duration_s ended
    p50_s: float | None  # nearest-rank quantiles of completed requests' times (None: none)
    p95_s: float | None
    p99_s: float | None
    mean_s: float | None
    max_s: float | None
    response_bytes: int  # bytes of the completed responses
    first_error: str | None  # the first failure's reason


def parse_requests(text: str) -> RequestTimes:
    """Summarise a client's requests.jsonl; ValueError when it holds no request."""
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not rows:
        raise ValueError("the client logged no request")
    ok = [r for r in rows if r["ok"]]
    times = sorted(float(r["time_s"]) for r in ok)
    q = {p: quantile(times, p / 100) if times else None for p in (50, 95, 99)}
    errors = [str(r.get("error")) for r in rows if not r["ok"]]
    return RequestTimes(
        n=len(rows),
        completed=len(ok),
        failures=len(rows) - len(ok),
        p50_s=q[50],
        p95_s=q[95],
        p99_s=q[99],
        mean_s=sum(times) / len(times) if times else None,
        max_s=times[-1] if times else None,
        response_bytes=sum(int(r["bytes"]) for r in ok),
        first_error=errors[0] if errors else None,
    )


@dataclass(frozen=True)
class FrameDelays:
    """Arrival of a CBR stream's frames against their deadline."""

    frames: int  # frames scheduled (duration_s x fps)
    received: int  # whole frames the receiver logged
    misses: int  # frames later than the deadline, or never received
    p50_ms: float | None  # nearest-rank quantiles of received frames' delay (None: none)
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None

    @property
    def miss_ratio(self) -> float:
        return self.misses / self.frames


def parse_cbr(text: str, frames: int, deadline_ms: float) -> FrameDelays:
    """Summarise a receiver's cbr.jsonl: delay is arrival minus the frame's scheduled send
    time (the sender's own queueing included, as an application sees it)."""
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    delays = sorted((int(r["recv_ns"]) - int(r["sched_ns"])) / 1e6 for r in rows)
    late = sum(d > deadline_ms for d in delays)
    q = {p: quantile(delays, p / 100) if delays else None for p in (50, 95, 99)}
    return FrameDelays(
        frames=frames,
        received=len(rows),
        misses=late + max(0, frames - len(rows)),
        p50_ms=q[50],
        p95_ms=q[95],
        p99_ms=q[99],
        max_ms=delays[-1] if delays else None,
    )


def cbr_parse(bundle: Path, cbr: Cbr, duration_s: float) -> FrameDelays:
    """The frame delays of a bundle's cbr.jsonl against the spec's schedule."""
    text = (bundle / CBR_LOG).read_text()
    return parse_cbr(text, cbr.frames(duration_s), cbr.deadline_ms)


def summary(run: Run, staging: Path) -> dict[str, Any]:
    """run.json `summary` of an app workload; ValueError (a failed attempt) when a log is
    unreadable or nothing got through."""
    t = run.traffic
    if t.tool == "requests":
        r = parse_requests((staging / REQUESTS_LOG).read_text())
        if not r.completed:
            raise ValueError(f"no request completed (first: {r.first_error})")
        return _requests_summary(r, t.duration_s)
    if t.cbr is None:
        raise ValueError("tool cbr needs its `cbr:` mapping")
    d = cbr_parse(staging, t.cbr, t.duration_s)
    if not d.received:
        raise ValueError("the receiver logged no frame")
    return _cbr_summary(d, t.cbr, t.duration_s)


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1e3


def _requests_summary(r: RequestTimes, duration_s: float) -> dict[str, Any]:
    return {
        "throughput_bps": r.response_bytes * 8 / duration_s,
        "requests": r.n,
        "requests_completed": r.completed,
        "request_failures": r.failures,
        "request_time_p50_ms": _ms(r.p50_s),
        "request_time_p95_ms": _ms(r.p95_s),
        "request_time_p99_ms": _ms(r.p99_s),
        "request_time_mean_ms": _ms(r.mean_s),
    }


def _cbr_summary(d: FrameDelays, cbr: Cbr, duration_s: float) -> dict[str, Any]:
    return {
        "throughput_bps": d.received * cbr.frame_size() * 8 / duration_s,
        "frames": d.frames,
        "frames_received": d.received,
        "deadline_misses": d.misses,
        "miss_ratio": d.miss_ratio,
        "frame_delay_p50_ms": d.p50_ms,
        "frame_delay_p95_ms": d.p95_ms,
        "frame_delay_p99_ms": d.p99_ms,
    }
