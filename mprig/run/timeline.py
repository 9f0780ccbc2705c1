"""What changes during a run, as the runner applies it: each path's trace (a rate schedule)
and the campaign's timeline events become per-host schedules of `tc` and `ip` lines, which
a timed agent (mprig/run/timeline_agent.py) started beside the traffic client applies and logs
(timeline-<host>.jsonl in the bundle). `summary` measures how well the timing held.

A rate, delay or loss change is a `tc qdisc change` of the path's root netem (or of the tbf
standing in for it) with the direction's whole new state, since netem's change resets what
it is not given; link down/up is `ip link set` on the router's client-facing interface
(both directions stop); a handover deletes the client's MPTCP endpoint on the path and adds
it again `gap_s` later (the path manager removes and re-creates the subflow).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import statistics
from collections.abc import Collection, Sequence
from pathlib import Path as FsPath
from typing import Any

from mprig.campaign import trace, wifi
from mprig.campaign.spec import Direction, Path, Variant
from mprig.campaign.timeline_spec import Event
from mprig.errors import UsageError
from mprig.rig.host import PathLink
from mprig.run import impair

Step = tuple[float, str, str, str]  # (t_s, tool, line without the tool, label)
WALK_STEP_S = 0.5  # a distance walk moves in steps of this many seconds
MAX_SCHEDULE_BYTES = 100_000  # the agent's argument; Linux caps one argument at 128 KiB
LOG = "timeline-{host}.jsonl"
WALK_LOG = "timeline-attenuator.jsonl"  # a lab's attenuator walk (mprig/run/labwalk.py)
SOURCE_NAME = "<mprig/run/timeline_agent.py>"
Change = tuple[float, dict[str, float], str]  # (t_s, direction fields, label)


@functools.cache
def source() -> str:
    """The agent's source, sent as `python3 -c`."""
    return FsPath(__file__).with_name("timeline_agent.py").read_text()


def change_line(dev: str, d: Direction) -> str:
    """The tc line (no leading `tc`) putting direction state `d` on dev's root qdisc."""
    if os.environ.get(impair.STANDIN_ENV) == "1":
        rate = f"{d.rate_mbit:.6f}".rstrip("0").rstrip(".")
        args = ["tbf", "rate", f"{rate}mbit", "burst", "32kb", "latency", "400ms"]
    else:
        args = ["netem", *impair.netem_args(d)]
    return shlex.join(["qdisc", "change", "dev", dev, "root", *args])


def _directions(which: str) -> tuple[str, ...]:
    return ("down", "up") if which == "both" else (which,)


def _trace_changes(path: Path, duration_s: float) -> dict[str, list[Change]]:
    if path.trace is None:
        return {}
    t = trace.load(path.trace.file)
    steps = trace.schedule(t, path.trace.bin_ms, duration_s)
    changes = [(s, {"rate_mbit": r}, f"trace {path.name}: {r:g} Mbit/s") for s, r in steps]
    return {d: list(changes) for d in _directions(path.trace.direction)}


def _walk_changes(path: Path, e: Event) -> list[tuple[str, Change]]:
    start, to_m, over = path.distance_m or 1.0, e.to_m or 1.0, e.over_s or 1.0
    n = max(1, round(over / WALK_STEP_S))
    out: list[tuple[str, Change]] = []
    for k in range(1, n + 1):
        at = path.model_copy(update={"distance_m": start + (to_m - start) * k / n})
        for d in ("down", "up"):
            rate, loss = wifi.netem_for_path(at, d)
            fields = {"rate_mbit": round(rate, 6), "loss_pct": round(min(loss, 100.0), 6)}
            label = f"walk {path.name}: {at.distance_m:g} m"
            out.append((d, (round(e.at_s + over * k / n, 6), fields, label)))
    return out


def _event_changes(path: Path, events: Sequence[Event]) -> dict[str, list[Change]]:
    out: dict[str, list[Change]] = {"down": [], "up": []}
    for e in events:
        if e.path != path.name:
            continue
        if e.action == "set":
            keys = ("rate_mbit", "delay_ms", "loss_pct")
            fields = {k: float(v) for k in keys if (v := getattr(e, k)) is not None}
            shown = ", ".join(f"{k} {v:g}" for k, v in fields.items())
            for d in _directions(e.direction):
                out[d].append((e.at_s, fields, f"set {path.name}: {shown}"))
        elif e.action == "walk":
            for d, change in _walk_changes(path, e):
                out[d].append(change)
    return out


def qdisc_steps(
    path: Path, link: PathLink, events: Sequence[Event], duration_s: float
) -> list[Step]:
    """The path's rate/delay/loss changes, folded in time order over its starting state."""
    start = wifi.effective_path(path)
    traced, evented = _trace_changes(path, duration_s), _event_changes(path, events)
    steps: list[Step] = []
    for d, dev in (("down", link.router_client_if), ("up", link.router_server_if)):
        state: Direction = getattr(start, d)
        for t, fields, label in sorted([*traced.get(d, []), *evented[d]], key=lambda c: c[0]):
            state = state.model_copy(update=fields)
            steps.append((t, "tc", change_line(dev, state), f"{label} ({d})"))
    return steps


def link_steps(
    e: Event, link: PathLink, variant: Variant, links: Sequence[PathLink]
) -> list[tuple[str, Step]]:
    """(host, step) of a down, up or handover event."""
    if e.action in ("down", "up"):
        line = shlex.join(["link", "set", "dev", link.router_client_if, e.action])
        return [(link.router, (e.at_s, "ip", line, f"link {e.action} {e.path}"))]
    if e.action != "handover" or variant.protocol != "mptcp":
        return []  # a tcp run has no endpoint to move
    eid = str(list(links).index(link) + 1)
    add = ["mptcp", "endpoint", "add", link.client_addr, "dev", link.client_if, "id", eid]
    delete = ["mptcp", "endpoint", "delete", "id", eid]
    back = round(e.at_s + e.gap_s, 6)
    return [
        ("client", (e.at_s, "ip", shlex.join(delete), f"handover {e.path}: address removed")),
        (
            "client",
            (back, "ip", shlex.join([*add, "subflow"]), f"handover {e.path}: address added"),
        ),
    ]


def schedules(
    paths: Sequence[Path],
    links: Sequence[PathLink],
    events: Sequence[Event],
    variant: Variant,
    duration_s: float,
    radios: Collection[str] = (),
) -> dict[str, list[Step]]:
    """Per host, its changes in time order (empty when nothing changes during the run).
    `radios` (a lab's attenuated Wi-Fi paths) have no netem: mprig/run/labwalk.py walks them."""
    by_name = {link.name: link for link in links}
    out: dict[str, list[Step]] = {}
    for path in paths:
        link = by_name.get(path.name)
        if link is None or path.engine == "ns3" or path.name in radios:
            continue
        out.setdefault(link.router, []).extend(qdisc_steps(path, link, events, duration_s))
    for e in events:
        if e.path in by_name:
            for host, step in link_steps(e, by_name[e.path], variant, links):
                out.setdefault(host, []).append(step)
    return {h: sorted(s, key=lambda x: x[0]) for h, s in out.items() if s}


def agent_argv(steps: Sequence[Step]) -> list[str]:
    """The agent's command for one host's steps; UsageError when they are too many."""
    text = json.dumps([list(s) for s in steps], separators=(",", ":"))
    if len(text) > MAX_SCHEDULE_BYTES:
        raise UsageError(
            f"the run's timeline has {len(steps)} changes on one host ({len(text)} bytes);"
            f" at most {MAX_SCHEDULE_BYTES} bytes: raise the trace's bin_ms or shorten the run"
        )
    return ["python3", "-c", source(), text]


def shown(argv: list[str]) -> list[str]:
    """The agent's argv for people: its source as a name."""
    return [SOURCE_NAME if a == source() else a for a in argv]


def restore_steps(
    events: Sequence[Event], links: Sequence[PathLink]
) -> list[tuple[str, list[str]]]:
    """Teardown: links set down are set up again (an agent killed before its `up`)."""
    by_name = {link.name: link for link in links}
    downed = {e.path for e in events if e.action == "down" and e.path in by_name}
    return [
        (by_name[p].router, ["ip", "link", "set", "dev", by_name[p].router_client_if, "up"])
        for p in sorted(downed)
    ]


def summary(logs: dict[str, str]) -> dict[str, Any]:
    """run.json `timeline`: how late the changes were (done minus scheduled, ms: p50, p95,
    max), how many failed, and each host's agent start (realtime)."""
    late: list[float] = []
    failed: list[str] = []
    starts: dict[str, float] = {}
    for host, text in logs.items():
        for line in text.splitlines():
            entry = json.loads(line)
            if entry.get("event") == "start":
                starts[host] = entry["realtime"]
            elif entry.get("event") == "change":
                late.append((entry["done"] - entry["t"]) * 1000)
                if entry["rc"] != 0:
                    failed.append(f"{host}: {entry['line']}: {entry.get('err', '')}")
    late.sort()
    stats = {
        "p50": round(statistics.median(late), 3) if late else None,
        "p95": round(late[min(len(late) - 1, int(0.95 * len(late)))], 3) if late else None,
        "max": round(late[-1], 3) if late else None,
    }
    skew = round((max(starts.values()) - min(starts.values())) * 1000, 3) if starts else None
    out = {"changes": len(late), "late_ms": stats, "failed": failed, "started": starts}
    return {**out, "start_skew_ms": skew}  # how far apart the hosts' t = 0 fell


def agents(
    run: Any, links: Sequence[PathLink], radios: Collection[str] = ()
) -> list[tuple[str, list[str], str]]:
    """(host, argv, log name) of the timed agent on each host that has changes in `run`
    (a plan.Run: its paths, timeline, variant and traffic duration)."""
    d = run.traffic.duration_s
    plan = schedules(run.paths, links, run.timeline, run.variant, d, radios)
    return [(h, agent_argv(steps), LOG.format(host=h)) for h, steps in plan.items()]


def logs(run: Any, links: Sequence[PathLink], radios: Collection[str] = ()) -> dict[str, str]:
    """Host -> the name of its agent's log, for each host with an agent in `run`."""
    return {h: log for h, _, log in agents(run, links, radios)}


def record(
    staging: FsPath, run: Any, links: Sequence[PathLink], radios: Collection[str] = ()
) -> dict[str, Any]:
    """run.json `timeline` from the fetched agent logs (and the lab's attenuator walk, its
    host "attenuator"), with each traced path's capacity (bin start s from the traffic's
    start, Mbit/s) for the report's overlay."""
    names = logs(run, links, radios)
    if (staging / WALK_LOG).exists():
        names["attenuator"] = WALK_LOG
    if not names:
        return {}
    texts = {h: (staging / n).read_text(errors="replace") for h, n in names.items()}
    out = summary(texts)
    out["capacity"] = {
        p.name: trace.capacity(trace.load(p.trace.file), p.trace.bin_ms, run.traffic.duration_s)
        for p in run.paths
        if p.trace is not None
    }
    return out
