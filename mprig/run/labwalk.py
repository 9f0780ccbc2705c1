"""A distance walk on a lab rig's Wi-Fi path: the attenuator moves, not netem (a real radio
never gets netem on top of its channel). The runner itself steps the attenuator during the
traffic, since it is the one that holds it (an RCDAT is reached over HTTP from the
controller, a TxPower over SSH, a stand-in lives in the runner); the timed agents on the
routers keep the other paths' changes (mprig/run/timeline.py leaves the radio paths out).

Steps: one each time the channel model's attenuation has moved by 1 dB, but never closer
than 250 ms. 1 dB is the TxPower driver's resolution (an RCDAT's is 0.25 dB) and a third of
the ~3 dB between 802.11 rate thresholds, so the radio sees the model's curve, not a staircase
across rates; 250 ms bounds the pace where the model moves faster than 4 dB/s (near the AP):
a set plus its read-back takes tens of ms over HTTP, about 100 ms over SSH. The walk's last
step lands on its final distance. Each step is set, read back and logged like the agents'
changes (timeline-attenuator.jsonl: scheduled, issued, done); a read-back that differs stops
the walk and fails the run.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

from mprig import fsio
from mprig.campaign.spec import Path
from mprig.campaign.timeline_spec import Event
from mprig.errors import UsageError
from mprig.run.run_attempt import RunFailed
from mprig.run.timeline import WALK_LOG

LOG = WALK_LOG  # in the bundle, beside the agents' timeline-<host>.jsonl
DB_STEP = 1.0  # a step each time the model's attenuation moved this much (dB)
MIN_GAP_S = 0.25  # but never closer than this (s)
SAMPLE_S = 0.01  # the walk's distance is sampled this finely to find the steps
TOLERANCE_DB = 0.01  # a read-back further than this from the applied value fails the run


@dataclass(frozen=True)
class WalkStep:
    """One attenuator setting of a walk."""

    t_s: float  # scheduled, seconds from the traffic's start
    path: str  # the Wi-Fi path
    distance_m: float  # the distance reached at t_s
    db: float  # the channel model's attenuation there, PL(d) - PL(physical_m)


def plan_steps(run: Any, radios: Mapping[str, Any]) -> list[WalkStep]:
    """Every walk step on the run's attenuated paths, in time order (run: a plan.Run;
    radios: path -> attenuator.RadioPath). RunFailed for a netem change on such a path."""
    steps: list[WalkStep] = []
    for path in run.paths:
        if (radio := radios.get(path.name)) is None:
            continue
        _refuse_netem(path, run.timeline)
        at_m = path.distance_m or radio.physical_m
        for e in sorted((e for e in run.timeline if e.path == path.name), key=lambda e: e.at_s):
            if e.action == "walk":
                steps += _walk(path.name, e, at_m, radio)
                at_m = e.to_m or at_m  # the next walk starts where this one ended
    return sorted(steps, key=lambda s: s.t_s)


def _refuse_netem(path: Path, events: list[Event]) -> None:
    why = "a radio path: its attenuator is the channel and it gets no netem"
    if path.trace is not None:
        raise RunFailed(f"{path.name}: trace on {why}", transient=False)
    for e in events:
        if e.path == path.name and e.action == "set":
            raise RunFailed(f"{path.name}: set on {why}; use walk", transient=False)


def _db(distance_m: float, radio: Any, where: str) -> float:
    from mprig.rig.attenuator import attenuation_for_distance  # urllib: only where radios are

    try:
        return attenuation_for_distance(distance_m, radio.physical_m, radio.radio)
    except UsageError as e:
        raise RunFailed(f"{where}: {e}", transient=False) from None


def _walk(name: str, e: Event, start_m: float, radio: Any) -> list[WalkStep]:
    to_m, over, at = e.to_m or start_m, e.over_s or SAMPLE_S, e.at_s
    n = max(1, round(over / SAMPLE_S))
    last_t, last_db = at, _db(start_m, radio, f"{name}: walk")
    out: list[WalkStep] = []
    for k in range(1, n + 1):
        t, d = round(at + over * k / n, 6), start_m + (to_m - start_m) * k / n
        db = _db(d, radio, f"{name}: walk at {t:g} s")
        if k == n or (abs(db - last_db) >= DB_STEP and t - last_t >= MIN_GAP_S - 1e-9):
            if k == n and out and t - last_t < MIN_GAP_S - 1e-9:
                out.pop()  # the final distance replaces a step too close before it
            out.append(WalkStep(t, name, round(d, 6), round(db, 3)))
            last_t, last_db = t, db
    return out


class Walker:
    """Sets each step when due on its own thread; the log lines and the first failure."""

    def __init__(
        self,
        steps: list[WalkStep],
        radios: Mapping[str, Any],
        clock: Callable[[], float],
        sleep: Callable[[float], object] | None,
    ) -> None:
        self.steps, self.radios, self.clock = steps, radios, clock
        self.stop = threading.Event()  # the traffic ended: no further step
        self.finished = threading.Event()  # the walk ended (done, stopped or failed)
        self.lines: list[dict[str, Any]] = []
        self.sleep = sleep or self.stop.wait  # a stop wakes the walk at once
        self.failure = ""
        self.t0, self.r0 = clock(), time.time()

    def run(self) -> None:
        """Walk until the last step, the stop flag or a failure."""
        self.lines.append({"event": "start", "realtime": round(self.r0, 6)})
        try:
            for i, step in enumerate(self.steps):
                wait = self.t0 + step.t_s - self.clock()
                if wait > 0:
                    self.sleep(wait)
                if self.stop.is_set() or not self.apply(i, step):
                    return
        finally:
            self.finished.set()

    def apply(self, i: int, step: WalkStep) -> bool:
        """Set one step and read it back; False (and the failure) when they differ."""
        att = self.radios[step.path].attenuator
        issued = self.clock() - self.t0
        try:
            applied, read = att.set_db(step.db), att.get_db()
            err = "" if abs(read - applied) <= TOLERANCE_DB else f"reads back {read:g} dB"
        except Exception as e:  # a driver's error ends the walk, recorded
            applied, read, err = step.db, float("nan"), str(e)
        done = self.clock() - self.t0
        entry = {"event": "change", "t": step.t_s, "issued": round(issued, 6)}
        entry |= {"done": round(done, 6), "realtime": round(self.r0 + done, 6)}
        entry |= {"tool": "attenuator", "line": f"{att.name}: {step.db:g} dB"}
        entry |= {"label": f"walk {step.path}: {step.distance_m:g} m", "rc": 1 if err else 0}
        entry |= {"err": err, "distance_m": step.distance_m, "db": step.db}
        self.lines.append(entry | {"applied_db": applied, "read_db": read})
        if err:
            where = f"walk step {i + 1} of {len(self.steps)}, t = {step.t_s:g} s"
            self.failure = (
                f"{step.path}: {att.name} {err} after {applied:g} dB was set"
                f" ({where}, {step.distance_m:g} m)"
            )
        return not err


@contextlib.contextmanager
def walking(
    run: Any,
    radios: Mapping[str, Any],
    staging: FsPath,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] | None = None,
) -> Iterator[Walker | None]:
    """Walk the run's attenuated paths while the body (the traffic) runs; write the log
    into the bundle; RunFailed when a step read back another value. Yields the walker
    (None without a walk)."""
    steps = plan_steps(run, radios) if radios else []
    if not steps:
        yield None
        return
    walker = Walker(steps, radios, clock, sleep)
    thread = threading.Thread(target=walker.run, name="labwalk", daemon=True)
    thread.start()
    try:
        yield walker
    finally:
        walker.stop.set()
        thread.join()
        fsio.write_text(staging / LOG, "".join(json.dumps(x) + "\n" for x in walker.lines))
    if walker.failure:
        raise RunFailed(walker.failure, transient=False)
