"""A run's timeline on its time-series figures: the changes its agents applied
(timeline-<host>.jsonl, mprig/run/timeline.py) as events, and each traced path's capacity
(run.json `timeline.capacity`) as a step line over the measured throughput.

Times are seconds since the run's start (run.json `timings.started`), as every panel's:
an agent logs the realtime it applied each change at, and its own start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig.errors import UsageError

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def kind(label: str) -> str:
    """What a change is, for the legend: `link down cell`, `set cell`, `walk wifi`..."""
    return label.split(":")[0].split(" (")[0]


def events(text: str, started: float, name: str) -> list[tuple[float, str]]:
    """(t since the run's start, kind) of each applied change of one agent's log, except
    a trace's steps (the capacity line shows them). NAME is used in errors."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            entry = json.loads(line) if line.strip() else {}
            if entry.get("event") != "change" or str(entry["label"]).startswith("trace "):
                continue
            out.append((float(entry["realtime"]) - started, kind(str(entry["label"]))))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise UsageError(f"{name}:{number}: not a timeline log line ({e})") from e
    return out


def run_events(run_dir: Path, started: float) -> list[tuple[float, str]]:
    """Every agent's applied changes in one run bundle."""
    found: list[tuple[float, str]] = []
    for log in sorted(run_dir.glob("timeline-*.jsonl")):
        found += events(log.read_text(errors="replace"), started, str(log))
    return sorted(found)


def capacity_lines(record: dict[str, Any]) -> dict[str, tuple[list[float], list[float]]]:
    """Path -> (t since the run's start, Mbit/s) of its trace's capacity, from run.json."""
    tl = record.get("timeline") or {}
    started = (record.get("timings") or {}).get("started")
    routers = {link.get("name"): link.get("router") for link in record.get("links") or []}
    out: dict[str, tuple[list[float], list[float]]] = {}
    for path, bins in (tl.get("capacity") or {}).items():
        agent = (tl.get("started") or {}).get(routers.get(path))
        if not isinstance(started, int | float) or not isinstance(agent, int | float) or not bins:
            continue
        offset = float(agent) - float(started)
        ts = [offset + float(t) for t, _ in bins]
        rates = [float(v) for _, v in bins]
        out[path] = ([*ts, ts[-1] + (ts[-1] - ts[-2] if len(ts) > 1 else 1.0)], [*rates, rates[-1]])
    return out


def overlay_capacity(ax: Axes, record: dict[str, Any]) -> None:
    """Each traced path's capacity as a dashed step line (Mbit/s, the throughput panel's)."""
    for path, (ts, rates) in sorted(capacity_lines(record).items()):
        ax.step(ts, rates, where="post", linestyle="--", linewidth=1, color="black",
                label=f"{path}: trace capacity")  # fmt: skip
        ax.legend(fontsize="small")


# One colour per kind of event on a panel, purple first (RBPM's actions had it alone).
EVENT_COLOURS = ("purple", "darkorange", "teal", "crimson", "olive", "navy", "brown", "grey")


def series_labels(frame: Any, name: str) -> list[str]:
    """A line label per row of a long time-series frame (series column `name`): the path
    where it is known, else the subflow; `<path> #<n>` where one series has several
    subflows on a path (a handover's new one), by first appearance, so none share a line."""
    n = len(frame)
    paths = [_text(v) for v in frame["path"].astype(object)] if "path" in frame else [""] * n
    subs = [_text(v) for v in frame["subflow"].astype(object)] if "subflow" in frame else [""] * n
    series = list(frame[name].astype(object))
    seen: dict[tuple[Any, str], list[str]] = {}
    for s, p, sub in zip(series, paths, subs, strict=True):
        if p and sub and sub not in (known := seen.setdefault((s, p), [])):
            known.append(sub)
    out = []
    for s, p, sub in zip(series, paths, subs, strict=True):
        many = len(seen.get((s, p), [])) > 1
        out.append(f"{p} #{seen[(s, p)].index(sub) + 1}" if p and sub and many else p or sub)
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
