"""Campaign spec: the top-level Campaign of an mprig campaign YAML, its sweep axes, and
the loader.

`load_campaign` reads a file and returns a validated `Campaign`; every problem becomes one
`mprig.errors.SpecError` line naming file:line, the field and what is allowed. The YAML is
composed into a node tree first (keeping line marks), checked for aliases, duplicate keys
and depth (mprig/campaign/spec_yaml.py), and only then constructed and validated. The section models
(paths, variants, traffic, capture, rig, sweep) are in mprig/campaign/spec_models.py, re-exported
here because most callers import them from here; the shared base is mprig/campaign/spec_base.py and
the error messages mprig/campaign/spec_describe.py.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, model_validator

from mprig.campaign import spec_spelling
from mprig.campaign.crossspec import SharedBottleneck, bottleneck_issues
from mprig.campaign.ipfamily import family_issues
from mprig.campaign.spec_base import (
    MAX_FILE_BYTES,
    MAX_RUNS,
    WHY_REPETITIONS,
    WHY_SEED,
    CampaignName,
    Loc,
    Source,
    SpecIssue,
    StrictModel,
    one_line,
    show,
)
from mprig.campaign.spec_describe import describe_validation as _describe_validation
from mprig.campaign.spec_describe import issues_error, located_message, spec_error
from mprig.campaign.spec_models import (
    DIRECTION_FIELDS,
    AxisValue,
    Capture,
    Direction,
    Path,
    Range,
    RigRef,
    Sweep,
    Traffic,
    Variant,
    check_variant_refs,
    unique_issues,
    variant_ref_issues,
)
from mprig.campaign.spec_yaml import YamlProblem, decode, read_yaml
from mprig.campaign.timeline_spec import MAX_EVENTS, Event, timeline_issues
from mprig.errors import SpecError
from mprig.safeio import NotRegularFile, read_regular

# The section models most callers import from here (explicit re-exports for mypy strict).
__all__ = ["Capture", "Direction", "Path", "Traffic", "Variant"]


class Campaign(StrictModel):
    """A whole campaign file."""

    name: CampaignName
    description: str = ""
    rig: RigRef = RigRef()
    paths: tuple[Path, ...] = Field(min_length=1, max_length=8)
    variants: tuple[Variant, ...] = Field(min_length=1, max_length=64)
    sweep: Sweep | None = None
    traffic: Traffic = Traffic()
    capture: Capture = Capture()
    repetitions: int = Field(default=1, ge=1, le=1000, description=WHY_REPETITIONS)
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description=WHY_SEED)
    order: Literal["sequential", "shuffle"] = "sequential"
    references: tuple[str, ...] = ()  # reports/references entries this campaign reproduces
    shared_bottleneck: SharedBottleneck | None = None  # paths converging on one shaped link
    timeline: tuple[Event, ...] = Field(default=(), max_length=MAX_EVENTS)  # mid-run events
    _source: Source | None = PrivateAttr(default=None)  # file and lines, when read from one
    _deprecations: tuple[str, ...] = PrivateAttr(default=())  # old spellings (spec_spelling)

    def input_files(self) -> tuple[str, ...]:
        """The files a run reads besides the campaign, as written (a relative one from the
        working directory): each path's trace."""
        return tuple(p.trace.file for p in self.paths if p.trace is not None)

    @property
    def deprecations(self) -> tuple[str, ...]:
        """A `file:line: field: ...` warning per old spelling the file used."""
        return self._deprecations

    @model_validator(mode="after")
    def _cross_references(self) -> Campaign:
        issues = [
            *unique_issues("paths", [p.name for p in self.paths]),
            *unique_issues("variants", [v.name for v in self.variants]),
            *variant_ref_issues(self.variants, [p.name for p in self.paths]),
            *timeline_issues(self.timeline, self.paths, self.traffic.duration_s),
            *bottleneck_issues(self.shared_bottleneck, self.paths, self.rig.inventory),
            *family_issues(self),
        ]
        if issues:
            raise SpecIssue.of(issues)
        if self.sweep is not None:
            _check_sweep(self, self.sweep)
        return self


# ---------------------------------------------------------------- cross-reference checks


def _check_sweep(campaign: Campaign, sweep: Sweep) -> None:
    checked: dict[str, tuple[AxisValue, ...]] = {}
    issues: list[tuple[Loc, str]] = []
    for key, spec in sweep.axes.items():
        loc: Loc = ("sweep", "axes", key)
        try:
            parse_axis(key, campaign)
            values = axis_values(spec)
        except ValueError as e:
            issues.append((loc, str(e)))
            continue
        if sweep.mode == "cartesian" and len(set(values)) != len(values):
            issues.append((loc, "lists a value twice"))
        checked[key] = values
    if issues:
        raise SpecIssue.of(issues)
    _check_sweep_size(campaign, sweep, [len(v) for v in checked.values()])
    for key, values in checked.items():
        # A range's values share its type and lie between its ends: its first two values
        # and its last stand for all of them.
        sample = values if not isinstance(sweep.axes[key], Range) else values[:2] + values[-1:]
        issue = next(
            (i for v in sample if (i := _axis_value_issue(campaign, key, v)) is not None), None
        )
        if issue is not None:
            issues.append((("sweep", "axes", key), issue))
    if issues:
        raise SpecIssue.of(issues)


def _axis_value_issue(campaign: Campaign, key: str, value: AxisValue) -> str | None:
    """Why one value of an axis does not fit its field, or None."""
    try:
        applied = apply_point(campaign, {key: value})
        check_variant_refs(applied.variants, [p.name for p in applied.paths])
    except ValidationError as e:
        loc, message = located_message(e, _model_of(e))
        if loc[-1:] != (key.rsplit(".", 1)[-1],):  # the axis names the field, not `down.aqm`
            message = f"{'.'.join(map(str, loc))}: {message}" if loc else message
        return f"value {show(value)}: {one_line(message)}"
    except SpecIssue as e:
        return f"value {show(value)}: {e.message}"
    return None


def _check_sweep_size(campaign: Campaign, sweep: Sweep, lengths: list[int]) -> None:
    if sweep.mode == "zip" and len(set(lengths)) > 1:
        shown = ", ".join(f"{k}: {n}" for k, n in zip(sweep.axes, lengths, strict=True))
        raise SpecIssue(("sweep", "mode"), f"zip needs axes of equal length, got {shown}")
    points = lengths[0] if sweep.mode == "zip" else math.prod(lengths)
    runs = points * len(campaign.variants) * campaign.repetitions
    if runs > MAX_RUNS:
        msg = (
            f"plan has {runs} runs ({points} sweep points x {len(campaign.variants)} variants"
            f" x {campaign.repetitions} repetitions); the limit is {MAX_RUNS}"
        )
        raise SpecIssue(("sweep",), msg)


# ---------------------------------------------------------------- sweep axes


SWEEP_SYNTAX = (
    "an axis is paths.<path>.<field>, paths.<path>.down|up.<field>, "
    "variants.<field>, variants.<variant>.<field> or traffic.<field>"
)
PATH_AXIS_FIELDS = (*DIRECTION_FIELDS, "distance_m", "wifi_standard", "channel_model")
VARIANT_AXIS_FIELDS = tuple(f for f in Variant.model_fields if f != "name")
TRAFFIC_AXIS_FIELDS = tuple(Traffic.model_fields)


@dataclass(frozen=True)
class Axis:
    """A parsed sweep axis: which field of which model(s) it sets."""

    section: Literal["paths", "variants", "traffic"]
    target: str | None  # path or variant name; None: every variant
    direction: Literal["down", "up"] | None  # paths: one direction, None: both
    field: str
    sysctl: str | None = None  # variants.[<name>.]sysctls.<key>


def parse_axis(key: str, campaign: Campaign) -> Axis:
    """Parse an axis name against the campaign's paths and variants; ValueError if bad."""
    section, _, rest = key.partition(".")
    if section == "paths":
        return _parse_path_axis(rest, [p.name for p in campaign.paths])
    if section == "variants":
        return _parse_variant_axis(rest, [v.name for v in campaign.variants])
    if section == "traffic" and rest in TRAFFIC_AXIS_FIELDS:
        return Axis("traffic", None, None, rest)
    if section == "traffic":
        raise ValueError(
            f"unknown traffic field {rest!r}; fields: {', '.join(TRAFFIC_AXIS_FIELDS)}"
        )
    raise ValueError(f"cannot sweep {key!r}; {SWEEP_SYNTAX}")


def _parse_path_axis(rest: str, names: list[str]) -> Axis:
    target, _, field = rest.partition(".")
    if target not in names:
        raise ValueError(f"no path named {target!r}; paths: {', '.join(names)}")
    direction, _, sub = field.partition(".")
    if direction in ("down", "up") and sub in DIRECTION_FIELDS:
        return Axis("paths", target, "down" if direction == "down" else "up", sub)
    if field in PATH_AXIS_FIELDS:
        return Axis("paths", target, None, field)
    allowed = ", ".join(PATH_AXIS_FIELDS)
    raise ValueError(f"unknown path field {field!r}; fields: {allowed} (or down.<f>, up.<f>)")


def _parse_variant_axis(rest: str, names: list[str]) -> Axis:
    head, _, tail = rest.partition(".")
    if tail and head not in names and head not in VARIANT_AXIS_FIELDS:
        raise ValueError(f"no variant named {head!r}; variants: {', '.join(names)}")
    target = head if head in names and tail else None
    field = tail if target else rest
    fname, _, sysctl = field.partition(".")
    if fname == "sysctls" and re.fullmatch(r"[a-z][a-z0-9_.]*", sysctl):
        return Axis("variants", target, None, fname, sysctl)
    if fname in VARIANT_AXIS_FIELDS and not sysctl:
        return Axis("variants", target, None, fname)
    allowed = ", ".join(VARIANT_AXIS_FIELDS)
    raise ValueError(
        f"unknown variant field {field!r}; fields: {allowed}, sysctls.<net.* key>"
        f" (variants: {', '.join(names)})"
    )


def axis_values(spec: tuple[AxisValue, ...] | Range) -> tuple[AxisValue, ...]:
    """The values of one axis; a range is inclusive and rounded to 9 decimals."""
    if not isinstance(spec, Range):
        if not spec:
            raise ValueError("needs at least one value")
        return spec
    if spec.stop < spec.start:
        raise ValueError(f"range stop {spec.stop:g} is below start {spec.start:g}")
    # In floats, stop - start can overflow to inf and a tiny step can make the count
    # inf: compare before converting to an int.
    steps = (spec.stop - spec.start) / spec.step
    if not steps < MAX_RUNS:
        raise ValueError(
            f"range from {spec.start:g} to {spec.stop:g} step {spec.step:g} has more than"
            f" {MAX_RUNS} values; the limit is {MAX_RUNS}"
        )
    count = math.floor(steps + 1e-9) + 1
    values = tuple(_tidy(round(spec.start + i * spec.step, 9)) for i in range(count))
    if len(set(values)) != len(values):
        raise ValueError(f"range step {spec.step:g} is below the 1e-9 resolution of its values")
    return values


def _tidy(value: float) -> AxisValue:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def sweep_points(sweep: Sweep | None) -> list[dict[str, AxisValue]]:
    """Every point of the sweep (axis -> value), in axis order; [{}] without a sweep."""
    if sweep is None:
        return [{}]
    keys = list(sweep.axes)
    values = [axis_values(sweep.axes[k]) for k in keys]
    combos = zip(*values, strict=True) if sweep.mode == "zip" else itertools.product(*values)
    return [dict(zip(keys, combo, strict=True)) for combo in combos]


def apply_point(campaign: Campaign, point: Mapping[str, AxisValue]) -> Campaign:
    """The campaign with a sweep point's values substituted and re-validated per model.

    Raises pydantic.ValidationError when a value does not fit its field.
    """
    if not point:
        return campaign
    axes = [(parse_axis(key, campaign), value) for key, value in point.items()]
    sections = {axis.section for axis, _ in axes}
    paths = [p.model_dump() for p in campaign.paths] if "paths" in sections else []
    variants = [v.model_dump() for v in campaign.variants] if "variants" in sections else []
    traffic = campaign.traffic.model_dump() if "traffic" in sections else {}
    for axis, value in axes:
        if axis.section == "paths":
            _set_path(paths, axis, value)
        elif axis.section == "variants":
            _set_variant(variants, axis, value)
        else:
            traffic[axis.field] = value
    update: dict[str, Any] = {}
    if paths:
        update["paths"] = tuple(Path.model_validate(p) for p in paths)
    if variants:
        update["variants"] = tuple(Variant.model_validate(v) for v in variants)
    if traffic:
        update["traffic"] = Traffic.model_validate(traffic)
    return campaign.model_copy(update=update)


def _set_path(paths: list[dict[str, Any]], axis: Axis, value: AxisValue) -> None:
    path = next(p for p in paths if p["name"] == axis.target)
    if axis.field not in DIRECTION_FIELDS:
        path[axis.field] = value
        return
    for direction in (axis.direction,) if axis.direction else ("down", "up"):
        path[direction][axis.field] = value


def _set_variant(variants: list[dict[str, Any]], axis: Axis, value: AxisValue) -> None:
    for variant in variants:
        if axis.target not in (None, variant["name"]):
            continue
        if axis.sysctl:
            variant["sysctls"] = {**variant["sysctls"], axis.sysctl: value}
        else:
            variant[axis.field] = value


# ---------------------------------------------------------------- loading YAML


# ---------------------------------------------------------------- loading


def load_campaign(path: str | FsPath) -> Campaign:
    """Read and validate a campaign file; SpecError (file:line per error) if invalid.

    Only a regular file is read: a FIFO, a device or a directory is refused unopened.
    """
    name = str(path)
    try:
        raw = read_regular(path, MAX_FILE_BYTES, "campaign file")
    except NotRegularFile as e:
        raise SpecError(name, None, "", str(e).removeprefix(f"{name}: ")) from None
    except OSError as e:
        raise SpecError(name, None, "", f"cannot read the file: {e.strerror}") from None
    return parse_campaign(raw, name)


def parse_campaign(text: str | bytes, filename: str = "<campaign>") -> Campaign:
    """Validate campaign YAML text; `filename` is used in error messages."""
    try:
        data, lines = read_yaml(decode(text))
    except YamlProblem as e:
        raise SpecError(filename, e.line, "", one_line(e.message)) from None
    source = Source(filename, lines, data)
    data, respelled = spec_spelling.respell(data)
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as e:
        raise spec_error(e, Campaign, source) from None
    campaign._source = source
    campaign._deprecations = spec_spelling.messages(filename, lines, source.data, respelled)
    return campaign


def campaign_error(campaign: Campaign, issues: list[tuple[Loc, str]]) -> SpecError:
    """A SpecError for issues a later stage (the plan, the run's commands) found in a
    campaign: with file:line when the campaign was read from a file."""
    source = campaign._source or Source("<campaign>", {}, campaign.model_dump(mode="json"))
    return issues_error(source, issues)


def describe_validation(e: ValidationError, root: type[BaseModel] | None = None) -> str:
    """One line for the first error of a ValidationError: `field: message`."""
    return _describe_validation(e, root or _model_of(e))


def _model_of(e: ValidationError) -> type[BaseModel]:
    models: dict[str, type[BaseModel]] = {
        m.__name__: m for m in (Campaign, Path, Direction, Variant, Traffic, Capture, Sweep)
    }
    return models.get(e.title, Campaign)
