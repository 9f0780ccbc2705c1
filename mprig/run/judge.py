"""One judge for specs: `mprig validate`, `mprig plan` and `mprig run` all plan a campaign
here, so whatever would stop a run stops validate, with file:line.

`plan_campaign` expands the campaign (plan.expand) and then builds, for every run, what the
runner builds from it without a host: the stack's sysctls (knobs), the Wi-Fi model's netem
(wifi), the traffic and capture commands (commands.for_run on the virtual rig's layout).
Each distinct variant, path and run setting is checked once. What needs a host (a
congestion control or scheduler in the kernel, a sysctl the kernel accepts, a lab
inventory's paths) is listed by `run_time_checks`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path as FsPath
from typing import Any

from pydantic import BaseModel

from mprig.campaign import plan, wifi, wifi_phy
from mprig.campaign.plan import Run
from mprig.campaign.spec import Campaign, Path, Traffic, Variant, campaign_error
from mprig.campaign.spec import load_campaign as _load
from mprig.campaign.spec_base import Loc, SpecIssue
from mprig.campaign.timeline_spec import timeline_issues
from mprig.errors import MprigError
from mprig.rig.layout import MAX_PATHS, layout
from mprig.run import commands
from mprig.stack import knobs


def plan_file(path: str | FsPath) -> tuple[Campaign, list[Run]]:
    """Read, validate and plan a campaign file; SpecError listing every problem."""
    campaign = _load(path)
    return campaign, plan_campaign(campaign)


def plan_campaign(campaign: Campaign) -> list[Run]:
    """The campaign's runs, after every check the runner makes without a host."""
    try:
        runs = plan.expand(campaign)
    except SpecIssue as e:
        raise campaign_error(campaign, list(e.issues)) from None
    issues = _Issues(campaign, len(runs))
    checked: set[tuple[int, ...]] = set()
    try:
        for run in runs:
            key = (id(run.variant), id(run.paths), id(run.traffic), id(run.capture))
            if key not in checked:  # other repetitions of the same point and variant
                checked.add(key)
                issues.check(run)
    finally:
        _KEYS.clear()
    if issues.found:
        raise campaign_error(campaign, issues.listed())
    return runs


def run_time_checks(campaign: Campaign, runs: list[Run]) -> list[str]:
    """What only the rig's hosts can tell, as short phrases."""
    variants = [r.variant for r in runs] or list(campaign.variants)
    ccs = ", ".join(knobs.congestion_controls(variants))
    out = [f"congestion controls {ccs} available (BPF ones built)"]
    schedulers = sorted({v.scheduler for v in variants if v.scheduler})
    if schedulers:
        out.append(f"schedulers {', '.join(schedulers)} in net.mptcp.available_schedulers")
    out.append("every sysctl accepted by the hosts' kernel")
    if campaign.rig.inventory != "virtual":
        out.append(f"inventory {campaign.rig.inventory}: its hosts and mprig_paths")
    if campaign.rig.wifi == "hwsim":
        out.append("mac80211_hwsim in the rig's kernel (VM mode)")
    return out


# -- what the runner computes from each run ---------------------------------------------


FULL_ASSEMBLY_RUNS = 1000  # up to this many runs, every run's full command list is built


class _Issues:
    """Problems found in a campaign's runs: at the spec's own line when the run uses the
    value as written, at the sweep (naming the points) when a sweep value caused it.

    Each distinct path, variant and traffic setting is checked once (a sweep of 100 000
    runs has far fewer); the whole command list of a run (commands.for_run) is built for
    the first run of each variant, and for every run of a plan of up to 1000 runs.
    """

    def __init__(self, campaign: Campaign, runs: int) -> None:
        self.campaign = campaign
        self.base: dict[tuple[Loc, str], None] = {}  # issues of values as written, in order
        self.swept: dict[str, dict[str, None]] = {}  # problem -> the points that have it
        self.links: Any = None
        self.known: dict[tuple[Loc, str], list[tuple[Loc, str]]] = {}  # (loc, json) -> issues
        self.as_written = {loc: key for loc, key in self._written(campaign)}
        self.assembled: set[str] = set() if runs > FULL_ASSEMBLY_RUNS else {"<every run>"}

    @staticmethod
    def _written(c: Campaign) -> list[tuple[Loc, str]]:
        out: list[tuple[Loc, str]] = [(("paths", i), _key(p)) for i, p in enumerate(c.paths)]
        out += [(("variants", j), _key(v)) for j, v in enumerate(c.variants)]
        return [*out, (("traffic",), _key(c.traffic) + "".join(k for _, k in out[: len(c.paths)]))]

    @property
    def found(self) -> bool:
        return bool(self.base or self.swept)

    def listed(self) -> list[tuple[Loc, str]]:
        swept = [
            (("sweep",), plan.points_message(problem, list(pts)))
            for problem, pts in self.swept.items()
        ]
        return [*self.base, *swept]

    def check(self, run: Run) -> None:
        c, clean = self.campaign, True
        for i, path in enumerate(run.paths):
            clean &= self._once(run, ("paths", i), _key(path), partial(path_issues, path))
        j = next(i for i, v in enumerate(c.variants) if v.name == run.variant.name)
        key = _key(run.variant)
        clean &= self._once(run, ("variants", j), key, lambda: variant_issues(run.variant))
        key = _key(run.traffic) + "".join(_key(p) for p in run.paths)
        clean &= self._once(run, ("traffic",), key, lambda: traffic_issues(run.traffic, run.paths))
        if run.timeline:  # a swept duration_s can end the traffic before an event
            clean &= self._once(run, ("timeline",), key, lambda: _timeline_issues(run))
        if clean and ("<every run>" in self.assembled or run.variant.name not in self.assembled):
            self.assembled.add(run.variant.name)
            self._commands(run)

    def _once(
        self, run: Run, loc: Loc, key: str, check: Callable[[], list[tuple[Loc, str]]]
    ) -> bool:
        """Check one setting (cached by its content); record its issues; whether none."""
        found = self.known.get((loc, key))
        if found is None:
            found = self.known[(loc, key)] = check()
        for sub, message in found:
            if self.as_written.get(loc) == key:
                self.base[((*loc, *sub), message)] = None
            else:
                named = _field_label(self.campaign, loc, sub)
                self._swept(f"{named}: {message}", run)
        return not found

    def _swept(self, problem: str, run: Run) -> None:
        self.swept.setdefault(problem, {})[plan.point_text(run.point)] = None

    def _commands(self, run: Run) -> None:
        if self.links is None:
            self.links = layout(run.paths) if len(run.paths) <= MAX_PATHS else ()
        try:
            commands.for_run(run, self.links)
        except (MprigError, ValueError, ArithmeticError) as e:
            if run.point:
                self._swept(str(e), run)
            else:
                self.base[((), str(e))] = None


_KEYS: dict[int, tuple[object, str]] = {}


def _key(model: BaseModel) -> str:
    """A setting's content as JSON, cached by identity (runs share their settings)."""
    cached = _KEYS.get(id(model))
    if cached is not None and cached[0] is model:
        return cached[1]
    key = model.model_dump_json()
    _KEYS[id(model)] = (model, key)
    return key


def _field_label(campaign: Campaign, loc: Loc, sub: Loc) -> str:
    """`paths.wifi.down.rate_mbit` for loc ("paths", 0) and sub ("down", "rate_mbit")."""
    section, *rest = loc
    if section == "paths":
        name = campaign.paths[int(rest[0])].name
    elif section == "variants":
        name = campaign.variants[int(rest[0])].name
    else:
        name = ""
    return ".".join(str(p) for p in (section, name, *sub) if p != "")


def path_issues(path: Path) -> list[tuple[Loc, str]]:
    """What the Wi-Fi model (wifi.effective_path, as the runner calls it) refuses."""
    if path.distance_m is None:
        return []
    standard = path.wifi_standard or "11g"
    issues: list[tuple[Loc, str]] = []
    same = path.down.rate_mbit == path.up.rate_mbit  # one message for the path shorthand
    for direction in ("down",) if same else ("down", "up"):
        try:
            wifi_phy.find_mode(standard, getattr(path, direction).rate_mbit)
        except ValueError as e:
            msg = f"with distance_m, rate_mbit names the 802.{standard} PHY mode: {e}"
            issues.append((("rate_mbit",) if same else (direction, "rate_mbit"), msg))
    if not issues:
        try:
            wifi.effective_path(path)
        except (ValueError, ArithmeticError) as e:
            issues.append(((), f"the Wi-Fi model fails: {e}"))
    return issues


def _timeline_issues(run: Run) -> list[tuple[Loc, str]]:
    """The campaign's check of its events against this run's paths and duration."""
    found = timeline_issues(run.timeline, run.paths, run.traffic.duration_s)
    return [(loc[1:], message) for loc, message in found]


def variant_issues(variant: Variant) -> list[tuple[Loc, str]]:
    """What the stack's knobs (knobs.sysctls, as the runner calls it) refuse."""
    try:
        knobs.sysctls(variant)
        knobs.congestion_controls([variant])
    except (MprigError, ValueError) as e:
        return [((), str(e))]
    return []


def traffic_issues(t: Traffic, paths: Iterable[Path]) -> list[tuple[Loc, str]]:
    """A bulk transfer that cannot end within its deadline even at the paths' full rate."""
    if t.tool != "bulk" or t.bytes is None:
        return []
    direction = "down" if t.direction == "download" else "up"
    rate = sum(getattr(p, direction).rate_mbit for p in paths)
    needed = t.bytes * 8 / (rate * 1e6)
    if needed <= t.duration_s:
        return []
    msg = (
        f"a bulk transfer of {t.bytes} bytes needs at least {math.ceil(needed)} s at the"
        f" paths' {rate:g} Mbit/s; raise duration_s (the transfer's deadline) or lower bytes"
    )
    return [(("duration_s",), msg)]
