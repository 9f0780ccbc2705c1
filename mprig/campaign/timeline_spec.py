"""Spec models of what changes during a run: a path's `trace` (a Mahimahi trace replayed as
its rate) and the campaign's `timeline` (link down/up, rate/delay/loss changes, handovers,
Wi-Fi distance walks). mprig/campaign/spec.py uses them; they import nothing of it, so its checks
that need the whole campaign (path names, the traffic's duration) live here as functions
returning (location, message) pairs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mprig.campaign import trace

Loc = tuple[str | int, ...]
MAX_EVENTS = 1000  # a timeline of a run; more would be a trace (use `trace`)
_BIN = "a trace is replayed in bins of 100 ms to 10 s (tc change timing holds at 100 ms)"
_AT = "seconds from the start of the traffic"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TraceRef(_Strict):
    """A path's trace: which file, which direction it shapes, the replay's bin."""

    file: str = Field(min_length=1, max_length=4096)  # Mahimahi trace; relative: from the cwd
    direction: Literal["down", "up", "both"] = "down"  # down: server -> client
    bin_ms: int = Field(default=250, ge=100, le=10_000, description=_BIN)  # replay step, ms


class Event(_Strict):
    """One timed change of one path during the traffic."""

    at_s: float = Field(ge=0, le=86_400, description=_AT)  # when, from the traffic's start
    path: str = Field(pattern=r"^[a-z][a-z0-9_]{0,15}$")  # the path it changes
    # down/up: the router's client-facing link; set: direction fields; handover: the
    # client's MPTCP endpoint on the path removed, then added again after gap_s; walk: the
    # Wi-Fi distance moves linearly to to_m over over_s (channel model -> netem)
    action: Literal["down", "up", "set", "handover", "walk"]
    direction: Literal["down", "up", "both"] = "both"  # set: which directions change
    rate_mbit: float | None = Field(default=None, gt=0, le=100_000)  # set: new rate, Mbit/s
    delay_ms: float | None = Field(default=None, ge=0, le=10_000)  # set: new one-way delay
    loss_pct: float | None = Field(default=None, ge=0, le=100)  # set: new loss, percent
    gap_s: float = Field(default=1.0, ge=0, le=3600)  # handover: seconds without the address
    to_m: float | None = Field(default=None, gt=0, le=10_000)  # walk: final distance, m
    over_s: float | None = Field(default=None, gt=0, le=86_400)  # walk: its duration, s

    @model_validator(mode="after")
    def _action_fields(self) -> Event:
        sets = [k for k in ("rate_mbit", "delay_ms", "loss_pct") if getattr(self, k) is not None]
        walk = [k for k in ("to_m", "over_s") if getattr(self, k) is not None]
        if self.action == "set" and not sets:
            raise ValueError("action set needs rate_mbit, delay_ms or loss_pct")
        if self.action != "set" and sets:
            raise ValueError(f"{sets[0]} belongs to action set, not {self.action}")
        if self.action == "walk" and len(walk) < 2:
            raise ValueError("action walk needs to_m (final distance) and over_s (duration)")
        if self.action != "walk" and walk:
            raise ValueError(f"{walk[0]} belongs to action walk, not {self.action}")
        return self

    @property
    def end_s(self) -> float:
        """When the event's last change happens."""
        return self.at_s + (self.over_s or 0) + (self.gap_s if self.action == "handover" else 0)


def fill_trace_rate(data: Any) -> Any:
    """A path mapping (before validation) whose traced directions lack `rate_mbit` gets the
    trace's mean rate there (the netem queue and link utilisation are sized by it).
    ValueError when the trace file is missing, empty, unsorted or unreadable."""
    if not isinstance(data, dict) or data.get("trace") is None:
        return data
    raw = data["trace"]
    raw = {"file": raw} if isinstance(raw, str) else raw
    if not isinstance(raw, dict) or not isinstance(raw.get("file"), str):
        return data  # the field's own validation names what is wrong
    mean = round(trace.load(raw["file"]).mean_mbit, 6)
    out = {**data, "trace": raw}
    if "rate_mbit" in data:
        return out
    which = raw.get("direction", "down")
    for direction in ("down", "up") if which == "both" else ("up",) if which == "up" else ("down",):
        given = out.get(direction)
        if given is None or (isinstance(given, dict) and "rate_mbit" not in given):
            out[direction] = {**(given or {}), "rate_mbit": mean}
    return out


def _not_netem(path: Any) -> str:
    """Why a path's rate cannot be changed by a netem change ("" when it can)."""
    if path.engine == "ns3":
        return "the ns-3 engine carries this path, not netem; use engine: netem"
    if any(getattr(d, "aqm", None) is not None for d in (path.down, path.up)):
        return "with aqm the rate is a shaper's below netem; remove aqm to change it"
    return ""


def timeline_issues(
    events: Sequence[Event], paths: Sequence[Any], duration_s: float
) -> list[tuple[Loc, str]]:
    """Events naming no path, ending after the traffic, needing a Wi-Fi distance or a
    netem rate; traces on paths whose rate is not netem's."""
    by_name = {p.name: p for p in paths}
    issues: list[tuple[Loc, str]] = [
        (("paths", i, "trace"), why)
        for i, p in enumerate(paths)
        if p.trace is not None and (why := _not_netem(p))
    ]
    for i, e in enumerate(events):
        path = by_name.get(e.path)
        if path is None:
            known = ", ".join(by_name)
            issues.append((("timeline", i, "path"), f"no path named {e.path!r}; paths: {known}"))
        elif e.action == "walk" and path.distance_m is None:
            issues.append((("timeline", i, "action"), f"walk needs distance_m on {e.path}"))
        elif e.action != "handover" and (why := _not_netem(path)):
            issues.append((("timeline", i, "action"), f"{e.action} on {e.path}: {why}"))
        if e.end_s >= duration_s:
            msg = f"{e.end_s:g} s is not within the traffic's {duration_s:g} s (traffic.duration_s)"
            issues.append((("timeline", i, "at_s"), msg))
    return issues
