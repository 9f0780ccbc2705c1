"""Plan: expand a campaign's sweep, variants and repetitions into an ordered run table."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from mprig.campaign import netemspec
from mprig.campaign.crossspec import SharedBottleneck
from mprig.campaign.spec import (
    Campaign,
    Capture,
    Path,
    Traffic,
    Variant,
    apply_point,
    describe_validation,
    sweep_points,
)
from mprig.campaign.spec_base import SpecIssue
from mprig.campaign.timeline_spec import Event

MAX_LISTED = 10  # sweep points named per problem; the rest are counted


@dataclass(frozen=True)
class Run:
    """One run of a campaign: everything the runner needs, sweep values already applied."""

    run_id: str  # stable id from parameters and repetition, safe as a directory name
    index: int  # position in execution order, 0-based
    repetition: int  # 1-based repetition number
    seed: int  # per-run seed, derived from the campaign seed and run id
    variant: Variant  # stack variant with sweep values applied
    paths: tuple[Path, ...]  # every path of the rig with sweep values applied
    traffic: Traffic
    capture: Capture
    point: dict[str, Any] = field(default_factory=dict)  # sweep axis -> value of this run
    timeline: tuple[Event, ...] = ()  # the campaign's mid-run events (mprig/run/timeline.py)
    bottleneck: SharedBottleneck | None = None  # paths converging on one shaped link
    # from the campaign seed and the repetition only: every variant and sweep point of a
    # repetition draws the same workload (traffic tool requests: the same response sizes)
    workload_seed: int = 0


def run_json(run: Run) -> dict[str, Any]:
    """One run with every parameter, as plain JSON values."""
    return {
        "index": run.index,
        "run_id": run.run_id,
        "repetition": run.repetition,
        "seed": run.seed,
        "point": run.point,
        "variant": run.variant.model_dump(mode="json"),
        "paths": [path_json(p) for p in run.paths],
        "traffic": run.traffic.model_dump(mode="json"),
        "capture": run.capture.model_dump(mode="json"),
        **bottleneck_json(run.bottleneck),
        **timeline_json(run.timeline),
    }


def expand(campaign: Campaign) -> list[Run]:
    """Every run of the campaign, in execution order (sequential or seeded shuffle).

    Sequential order is repetition (outermost), then sweep point, then variant, so that
    each repetition is a full pass and slow drifts of the rig spread over every variant.
    Raises SpecIssue (at the sweep) naming the points whose values do not fit together,
    and the points that repeat another's runs (same parameters, same run id).
    """
    points = _applied_points(campaign)
    shared = [_canonical(applied, point) for point, applied in points]
    runs: list[Run] = []
    for repetition in range(1, campaign.repetitions + 1):
        for (point, applied), common in zip(points, shared, strict=True):
            for variant in applied.variants:
                runs.append(_run(applied, variant, point, repetition, common))
    _check_unique(runs)
    if campaign.order == "shuffle":
        random.Random(campaign.seed).shuffle(runs)
    return [dataclasses.replace(run, index=i) for i, run in enumerate(runs)]


def _applied_points(campaign: Campaign) -> list[tuple[dict[str, Any], Campaign]]:
    """Every sweep point with the campaign it makes; SpecIssue for points that do not fit."""
    points: list[tuple[dict[str, Any], Campaign]] = []
    bad: dict[str, list[str]] = {}
    for point in sweep_points(campaign.sweep):
        try:
            points.append((point, apply_point(campaign, point)))
        except ValidationError as e:
            bad.setdefault(describe_validation(e), []).append(point_text(point))
    if bad:
        issues = [(("sweep",), points_message(problem, pts)) for problem, pts in bad.items()]
        raise SpecIssue.of(issues)
    return points


def _check_unique(runs: list[Run]) -> None:
    """Two runs with one id would share a bundle: a zip sweep that lists a point twice."""
    seen: dict[str, Run] = {}
    repeated: dict[str, None] = {}
    for run in runs:
        if run.run_id in seen:
            repeated[point_text(run.point)] = None
        seen[run.run_id] = run
    if repeated:
        problem = (
            "the same runs as another point (same parameters, same run ids);"
            " make every point differ"
        )
        raise SpecIssue(("sweep",), points_message(problem, list(repeated)))


def point_text(point: dict[str, Any]) -> str:
    """`(paths.wifi.delay_ms=5, variants.cc=reno)`: a sweep point as messages show it."""
    return "(" + ", ".join(f"{k}={_cell(v)}" for k, v in point.items()) + ")"


def _cell(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def points_message(problem: str, points: list[str]) -> str:
    shown = "; ".join(points[:MAX_LISTED])
    more = f" and {len(points) - MAX_LISTED} more" if len(points) > MAX_LISTED else ""
    return f"{'point' if len(points) == 1 else 'points'} {shown}{more}: {problem}"


def run_count(campaign: Campaign) -> int:
    """How many runs `expand` returns, without expanding."""
    points = len(sweep_points(campaign.sweep))
    return points * len(campaign.variants) * campaign.repetitions


def _canonical(applied: Campaign, point: dict[str, Any]) -> dict[str, Any]:
    """The parameters every run of one sweep point shares, as plain JSON values."""
    return {
        "paths": [path_json(p) for p in applied.paths],
        "traffic": applied.traffic.model_dump(mode="json", exclude=_unused(applied.traffic)),
        "capture": applied.capture.model_dump(mode="json"),
        **bottleneck_json(applied.shared_bottleneck),
        **timeline_json(applied.timeline),
        "point": point,
    }


def path_json(path: Path) -> dict[str, Any]:
    """A path as plain JSON; no `cross_traffic` key when it has none, so adding the key
    kept every earlier run id (nor queue keys at their default: netemspec.hashed)."""
    unused = {"cross_traffic"} if not path.cross_traffic else None
    dump = path.model_dump(mode="json", exclude=unused)
    if path.trace is None:
        dump.pop("trace", None)  # no trace: no key, so adding it kept every earlier run id
    if dump.get("family") == "ipv4":
        dump.pop("family")  # the default: no key, so adding it kept every earlier run id
    return netemspec.hashed(dump)


def timeline_json(events: tuple[Event, ...]) -> dict[str, Any]:
    """`timeline` for a campaign that has one (absent otherwise: earlier run ids hold)."""
    return {"timeline": [e.model_dump(mode="json") for e in events]} if events else {}


def bottleneck_json(b: SharedBottleneck | None) -> dict[str, Any]:
    """`shared_bottleneck` for a campaign that has one (absent otherwise: earlier run ids hold)."""
    return {"shared_bottleneck": b.model_dump(mode="json")} if b is not None else {}


def _variant_id_json(variant: Variant) -> dict[str, Any]:
    """The variant's parameters as its runs' ids hash them: the initial buffers, added
    later, only where they are set, so adding them kept every earlier run id."""
    dump = variant.model_dump(mode="json")
    for key in ("rmem_initial", "wmem_initial"):
        if dump[key] is None:
            del dump[key]
    return dump


def _unused(traffic: Traffic) -> set[str]:
    """The workload tools' fields when another tool leaves them unset: left out of the
    hash, so adding them kept every earlier run id."""
    keys = ("block_bytes", "interval_ms", "requests", "cbr", "ping_interval_ms")
    return {k for k in keys if getattr(traffic, k) is None}


def _run(
    applied: Campaign,
    variant: Variant,
    point: dict[str, Any],
    repetition: int,
    shared: dict[str, Any],
) -> Run:
    params = {**shared, "variant": _variant_id_json(variant), "repetition": repetition}
    run_id = make_run_id(variant.name, point, repetition, params)
    return Run(
        run_id=run_id,
        index=0,
        repetition=repetition,
        seed=run_seed(applied.seed, run_id),
        workload_seed=run_seed(applied.seed, f"workload-r{repetition}"),
        variant=variant,
        paths=applied.paths,
        traffic=applied.traffic,
        capture=applied.capture,
        bottleneck=applied.shared_bottleneck,
        timeline=applied.timeline,
        point=dict(point),
    )


def make_run_id(variant: str, point: dict[str, Any], repetition: int, params: Any) -> str:
    """`<variant>-<short point>-r<rep>-<8 hex>`: readable, unique, a safe directory name.

    The hash covers the canonical JSON of every parameter, so editing the spec changes the
    id (and a resumed campaign redoes the runs whose parameters changed).
    """
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:8]
    short = "-".join(f"{_axis_label(k)}_{_slug(v)}" for k, v in point.items())[:80]
    middle = f"-{short.strip('-')}" if short else ""
    return f"{variant}{middle}-r{repetition}-{digest}"


def _axis_label(key: str) -> str:
    """`paths.wifi.down.delay_ms` -> `wifi.down.delay_ms`; `variants.cc` -> `cc`."""
    return _slug(key.split(".", 1)[1] if "." in key else key)


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "_", str(value))


def run_seed(campaign_seed: int, run_id: str) -> int:
    """A 32-bit seed for one run, from the campaign seed and the run id."""
    digest = hashlib.sha256(f"{campaign_seed}/{run_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")
