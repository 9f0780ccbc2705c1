"""Campaign spec: the YAML schema of an mprig campaign (pydantic v2) and its loader.

`load_campaign` reads a file and returns a validated `Campaign`; every problem becomes one
`mprig.errors.SpecError` line naming file:line, the field and what is allowed. The YAML is
composed into a node tree first (keeping line marks), checked for aliases, duplicate keys
and depth, and only then constructed and validated.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from mprig import apps_spec, netemspec, presets, sysctl_keys
from mprig.crossspec import CrossFlow, SharedBottleneck, bottleneck_issues
from mprig.errors import SpecError, UsageError
from mprig.ns3spec import ns3_issue
from mprig.safeio import NotRegularFile, read_regular
from mprig.timeline_spec import MAX_EVENTS, Event, TraceRef, fill_trace_rate, timeline_issues

MAX_RUNS = 100_000  # plan size cap: a campaign expanding to more runs is an error
MAX_FILE_BYTES = 64 * 1024  # a campaign file is small; larger input is refused unread
MAX_DEPTH = 32  # YAML nesting depth limit (campaigns need about 5)
MAX_DIGITS = 30  # a number written with more digits is refused before it is converted
# Link header (Linux cooked SLL2 of `tcpdump -i any`: 20) + IPv4 header with options (up to
# 60; IPv6 is 40) + TCP header with the full 40 bytes of options (60): the DSS option is
# always in the capture, whatever other options precede it.
MIN_SNAPLEN = 20 + 60 + 60

Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,15}$")]
"""A path or variant name: lower case, digits, underscore; safe in ids, files and shells."""

CampaignName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]

Token = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
"""A kernel identifier (congestion control, scheduler, preset): lands in sysctl values."""


def _scalar_to_str(value: object) -> object:
    """Let `tcp_dsack: 0` mean "0": sysctl values are strings, YAML gives ints and bools."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return str(value)
    return value


def _settable_sysctl(key: str) -> str:
    problem = sysctl_keys.key_problem(key)
    if problem:
        raise ValueError(problem)
    return key


SysctlKey = Annotated[
    str, Field(pattern=r"^[a-z][a-z0-9_.]*$", max_length=128), AfterValidator(_settable_sysctl)
]
SysctlValue = Annotated[
    str,
    BeforeValidator(_scalar_to_str),
    Field(pattern=r"^[A-Za-z0-9 _.:,/-]*$", max_length=256),
]

PATTERN_HELP = {
    r"^[a-z][a-z0-9_]{0,15}$": "a lower-case letter, then up to 15 of a-z 0-9 _",
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$": "a letter or digit, then up to 63 of A-Z a-z 0-9 _ . -",
    r"^[a-z][a-z0-9_]{0,31}$": "a lower-case letter, then up to 31 of a-z 0-9 _",
    r"^[a-z][a-z0-9_.]*$": "a sysctl name (a-z 0-9 _ .)",
    r"^[A-Za-z0-9 _.:,/-]*$": "letters, digits, spaces and _ . : , / -",
}


class StrictModel(BaseModel):
    """Base of every spec model: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Loc = tuple[str | int, ...]


class SpecIssue(ValueError):
    """A validator's complaint about a location below the model that raised it; `issues`
    holds every complaint (loc, message) when a check found several."""

    def __init__(self, loc: Loc, message: str, more: tuple[tuple[Loc, str], ...] = ()) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message
        self.issues: tuple[tuple[Loc, str], ...] = ((loc, message), *more)

    @classmethod
    def of(cls, issues: Sequence[tuple[Loc, str]]) -> SpecIssue:
        """One SpecIssue carrying several (at least one)."""
        (loc, message), *more = issues
        return cls(loc, message, tuple(more))


# Why each bound is where it is: shown with the allowed range in error messages.
_RATE = "100 Gbit/s is beyond any link a rig or netem carries"
_DELAY = "10 s one way is beyond any real path, satellite included"
_PCT = "a percentage of packets"
_LIMIT = "a million 1500-byte packets is 1.5 GB of queue memory per direction"
_DISTANCE = "the 802.11 model's range; links die within a few hundred metres"
_BUFFER = "4096 is the kernel's minimum buffer; 1 GiB its largest window"
_DURATION = (
    "iperf3 counts whole seconds and treats -t 0 as forever; a bulk transfer must end within it"
)
_OMIT = "an hour of warm-up"
_BYTES = "1 TiB"
_BLOCK = "16 bytes carry the block's number and send time; 1 MB is far past any application write"
_INTERVAL = "a block a minute; 0 writes back to back"
_PING = "100 probes a second per path at most (they load the path too); one each 10 s at least"
BLOCK_BYTES_DEFAULT = 8192  # seed 004 Fig. 7: 8 KB blocks
_SNAPLEN = (
    "Linux cooked header 20 + IPv4 header up to 60 + TCP header with the full 40 bytes of"
    " options 60, so every MPTCP option (DSS) is captured"
)
_REPETITIONS = "with sweep points and variants, a plan has at most 100000 runs"
_SEED = "a 32-bit seed"


# Calibrations of the Wi-Fi channel model, one per paper (mprig/wifi.py CALIBRATIONS).
ChannelModel = Literal["ns3-default", "seed000", "seed003"]


class Direction(netemspec.QueueKnobs, StrictModel):
    """Impairment of one direction of a path (applied with tc netem on its router); the
    queue discipline and loss model fields come from netemspec.QueueKnobs."""

    rate_mbit: float = Field(gt=0, le=100_000, description=_RATE)  # bottleneck rate, Mbit/s
    delay_ms: float = Field(default=0, ge=0, le=10_000, description=_DELAY)  # one-way delay
    jitter_ms: float = Field(default=0, ge=0, le=10_000, description=_DELAY)  # delay jitter
    loss_pct: float = Field(default=0, ge=0, le=100, description=_PCT)  # random loss
    # percent of packets netem sends at once, ahead of the delayed ones (needs delay_ms > 0)
    reorder_pct: float = Field(default=0, ge=0, le=100, description=_PCT)
    limit_pkts: int = Field(default=1000, ge=1, le=1_000_000, description=_LIMIT)  # packets

    @model_validator(mode="after")
    def _reorder_needs_delay(self) -> Direction:
        if issues := netemspec.direction_issues(self):
            raise SpecIssue.of(issues)
        if self.reorder_pct and not self.delay_ms:
            raise SpecIssue(
                ("reorder_pct",), "reordering needs a delay to overtake: set delay_ms > 0"
            )
        return self


# netem's own fields first, then the queue and loss model's (listed so in errors)
DIRECTION_FIELDS = tuple(sorted(Direction.model_fields, key=netemspec.FIELDS.__contains__))


class Path(StrictModel):
    """One network path between client and server (one client interface, one router).

    Direction fields given at path level apply to both directions; `down:` and `up:`
    mappings override them field by field.
    """

    name: Name  # e.g. wifi, cell, wired1
    kind: Literal["wifi", "cellular", "wired"]  # decides the client interface name
    down: Direction  # server -> client direction
    up: Direction  # client -> server direction
    # wifi: distance to the AP
    distance_m: float | None = Field(default=None, gt=0, le=10_000, description=_DISTANCE)
    wifi_standard: Literal["11b", "11g"] | None = None  # wifi: PHY used by the channel model
    # wifi: the channel model's calibration (mprig/wifi.py CALIBRATIONS); None: the default
    channel_model: ChannelModel | None = None
    # what carries the path on the virtual rig: netem (the channel model's rate and loss) or
    # ns3 (a real-time ns-3 802.11 link between the namespaces, docs/ns3-engine.md)
    engine: Literal["netem", "ns3"] = "netem"
    trace: TraceRef | None = None  # a Mahimahi trace replayed as the rate (timeline_spec.py)
    # competing flows across this path (mprig/crossspec.py, docs/campaign.md)
    cross_traffic: tuple[CrossFlow, ...] = Field(default=(), max_length=8)

    @model_validator(mode="after")
    def _wifi_fields(self) -> Path:
        issues: list[tuple[Loc, str]] = [
            ((key,), f"is for Wi-Fi paths (the 802.11 channel model); this path is {self.kind}")
            for key in ("distance_m", "wifi_standard", "channel_model")
            if self.kind != "wifi" and getattr(self, key) is not None
        ]
        if self.distance_m is not None:
            issues += netemspec.wifi_model_issues(self.down, self.up)
        if self.engine == "ns3" and (why := ns3_issue(self)):
            issues.append((("engine",), why))
        if issues:
            raise SpecIssue.of(issues)
        return self

    @model_validator(mode="before")
    @classmethod
    def _trace_rate(cls, data: Any) -> Any:
        try:
            return fill_trace_rate(data)
        except ValueError as e:
            raise SpecIssue(("trace",), str(e)) from None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(k in data for k in DIRECTION_FIELDS):
            return data
        shared = {k: v for k, v in data.items() if k in DIRECTION_FIELDS}
        rest = {k: v for k, v in data.items() if k not in DIRECTION_FIELDS}
        for direction in ("down", "up"):
            override = rest.get(direction) or {}
            if isinstance(override, dict):
                rest[direction] = {**shared, **override}
        return rest


class Variant(StrictModel):
    """A named stack configuration: protocol, congestion control, MPTCP knobs, sysctls."""

    name: Name
    protocol: Literal["mptcp", "tcp"] = "mptcp"
    path: Name | None = None  # tcp: the one path it uses (required for tcp)
    paths: tuple[Name, ...] | None = None  # mptcp: paths with a subflow endpoint (default all)
    cc: Token = "cubic"  # net.ipv4.tcp_congestion_control
    scheduler: Token | None = None  # net.mptcp.scheduler, where the kernel has it
    # net.mptcp.pm_type; rbpm: the kernel's, with mprig's RBPM controller on the client
    path_manager: Literal["kernel", "userspace", "rbpm"] = "kernel"
    recovery: Token | None = None  # reordering-recovery preset (nopr, dsack, frto, eifel)
    sysctls: dict[SysctlKey, SysctlValue] = Field(default_factory=dict)  # client and server
    # receive and send buffer max, bytes
    rmem: int | None = Field(default=None, ge=4096, le=1 << 30, description=_BUFFER)
    wmem: int | None = Field(default=None, ge=4096, le=1 << 30, description=_BUFFER)

    @field_validator("recovery")
    @classmethod
    def _known_recovery(cls, value: str | None) -> str | None:
        if value is not None and value not in presets.RECOVERY_PRESETS:
            known = ", ".join(presets.RECOVERY_PRESETS)
            raise ValueError(f"unknown recovery preset {value!r}; known: {known}")
        return value

    @field_validator("cc")
    @classmethod
    def _cc_exists(cls, value: str) -> str:
        cc = presets.CC_PRESETS.get(value)
        if cc is not None and cc.algorithm is None:
            raise ValueError(f"cc {value!r} ({cc.paper_name}): {cc.note}")
        return value

    @model_validator(mode="after")
    def _recovery_cc(self) -> Variant:
        try:
            presets.check_recovery_cc(self.recovery, self.cc)
        except UsageError as e:
            raise SpecIssue(("recovery",), str(e)) from None
        return self

    @model_validator(mode="after")
    def _protocol_fields(self) -> Variant:
        if self.protocol == "tcp" and self.path is None:
            raise SpecIssue(("path",), "a tcp variant needs `path: <path name>`")
        if self.protocol == "tcp" and self.paths is not None:
            raise SpecIssue(("paths",), "`paths` is for mptcp variants; tcp uses `path`")
        if self.protocol == "mptcp" and self.path is not None:
            raise SpecIssue(("path",), "`path` is for tcp variants; mptcp uses `paths`")
        if self.paths is not None and not self.paths:
            raise SpecIssue(("paths",), "must name at least one path (or leave it out: all)")
        return self


class Traffic(StrictModel):
    """What a run sends."""

    tool: Literal["iperf3", "bulk", "blocks", "requests", "cbr"] = "iperf3"
    direction: Literal["download", "upload"] = "download"  # download: server sends
    # iperf3 -t; bulk: the transfer's deadline; blocks: how long the sender writes
    duration_s: float = Field(default=10, ge=1, le=86_400, description=_DURATION)
    omit_s: float = Field(default=0, ge=0, le=3_600, description=_OMIT)  # iperf3 -O
    # bulk: size, sha256 checked
    bytes: int | None = Field(default=None, gt=0, le=1 << 40, description=_BYTES)
    # blocks: size of each block written (None for the other tools: 8192 for blocks)
    block_bytes: int | None = Field(default=None, ge=16, le=1_000_000, description=_BLOCK)
    # blocks: pause after each block, ms (None for the other tools: 0 for blocks)
    interval_ms: float | None = Field(default=None, ge=0, le=60_000, description=_INTERVAL)
    requests: apps_spec.Requests | None = None  # requests: mprig/apps_spec.py, docs/campaign.md
    cbr: apps_spec.Cbr | None = None  # cbr: the stream's rate, frames and deadline
    # latency probe: an ICMP echo from the client over every path each this many ms, during
    # the whole run (mprig/latency.py); None: no probe
    ping_interval_ms: float | None = Field(default=None, ge=10, le=10_000, description=_PING)

    @model_validator(mode="before")
    @classmethod
    def _blocks_defaults(cls, data: Any) -> Any:
        """The blocks tool's fields take their defaults only for blocks, so the other
        tools' run ids (which hash every traffic field) stay what they were."""
        if isinstance(data, dict) and data.get("tool") == "blocks":
            data = {"block_bytes": BLOCK_BYTES_DEFAULT, "interval_ms": 0, **data}
        return data

    @model_validator(mode="after")
    def _tool_fields(self) -> Traffic:
        if self.tool == "bulk" and self.bytes is None:
            raise SpecIssue(("bytes",), "tool bulk needs `bytes: <size>`")
        if issues := apps_spec.tool_issues(self.tool, dict(self)):
            raise SpecIssue.of(issues)
        if self.tool == "iperf3":
            issues = [
                (
                    (key,),
                    f"iperf3 counts whole seconds (-{flag} {value:g} would run"
                    f" {int(value)} s); use a whole number",
                )
                for key, flag, value in (
                    ("duration_s", "t", self.duration_s),
                    ("omit_s", "O", self.omit_s),
                )
                if not float(value).is_integer()
            ]
            if self.omit_s >= self.duration_s:
                issues.append((("omit_s",), f"must be < duration_s ({self.duration_s:g})"))
            if issues:
                raise SpecIssue.of(issues)
        return self


class Capture(StrictModel):
    """Packet capture settings."""

    enabled: bool = True
    hosts: tuple[Literal["client", "server"], ...] = ("client", "server")
    # bytes kept per packet
    snaplen: int = Field(default=200, ge=MIN_SNAPLEN, le=262_144, description=_SNAPLEN)

    @model_validator(mode="after")
    def _hosts(self) -> Capture:
        if self.enabled and not self.hosts:
            raise SpecIssue(("hosts",), "name client and/or server, or set enabled: false")
        if len(set(self.hosts)) != len(self.hosts):
            raise SpecIssue(("hosts",), "names a host twice")
        return self


class RigRef(StrictModel):
    """Which rig runs the campaign."""

    inventory: str = "virtual"  # "virtual" or a path to an Ansible inventory
    mode: Literal["auto", "native", "vm"] = "auto"  # virtual rig: VM mode choice
    # virtual rig: the first wifi path's client hop. veth: netem only; hwsim: a real 802.11
    # link (mac80211_hwsim, hostapd and wpa_supplicant set up by the lab's wifi_ap and
    # wifi_client roles), which needs a kernel with mac80211_hwsim (VM mode here).
    wifi: Literal["veth", "hwsim"] = "veth"


class Range(StrictModel):
    """An inclusive numeric range for a sweep axis: start, stop, step."""

    start: float
    stop: float
    step: float = Field(gt=0)


AxisValue = float | int | str


class Sweep(StrictModel):
    """Axes to sweep. An axis names a field: `paths.<name>.<field>` (both directions),
    `paths.<name>.down.<field>`, `variants.<field>` (every variant) or
    `variants.<name>.<field>`; its values are a list or a range."""

    mode: Literal["cartesian", "zip"] = "cartesian"
    axes: dict[str, tuple[AxisValue, ...] | Range] = Field(min_length=1, max_length=16)

    @field_validator("axes", mode="before")
    @classmethod
    def _axis_forms(cls, axes: Any) -> Any:
        if not isinstance(axes, dict):
            return axes
        return {key: _axis_form(key, spec) for key, spec in axes.items()}


def _axis_form(key: str, spec: Any) -> Any:
    """A list stays a list; a mapping must be a valid Range; anything else is an error."""
    if isinstance(spec, list):
        return spec
    if not isinstance(spec, dict):
        msg = f"must be a list of values or a range {{start, stop, step}}, got {_show(spec)}"
        raise SpecIssue((key,), msg)
    try:
        return Range.model_validate(spec)
    except ValidationError as e:
        raise SpecIssue((key,), f"range: {describe_validation(e, Range)}") from None


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
    repetitions: int = Field(default=1, ge=1, le=1000, description=_REPETITIONS)
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description=_SEED)
    order: Literal["sequential", "shuffle"] = "sequential"
    references: tuple[str, ...] = ()  # reports/references entries this campaign reproduces
    shared_bottleneck: SharedBottleneck | None = None  # paths converging on one shaped link
    timeline: tuple[Event, ...] = Field(default=(), max_length=MAX_EVENTS)  # mid-run events
    _source: Source | None = PrivateAttr(default=None)  # file and lines, when read from one

    @model_validator(mode="after")
    def _cross_references(self) -> Campaign:
        issues = [
            *_unique_issues("paths", [p.name for p in self.paths]),
            *_unique_issues("variants", [v.name for v in self.variants]),
            *_variant_ref_issues(self.variants, [p.name for p in self.paths]),
            *timeline_issues(self.timeline, self.paths, self.traffic.duration_s),
            *bottleneck_issues(self.shared_bottleneck, self.paths, self.rig.inventory),
        ]
        if issues:
            raise SpecIssue.of(issues)
        if self.sweep is not None:
            _check_sweep(self, self.sweep)
        return self


# ---------------------------------------------------------------- cross-reference checks


def _unique_issues(section: str, names: list[str]) -> list[tuple[Loc, str]]:
    return [
        ((section, i, "name"), f"duplicate name {name!r}")
        for i, name in enumerate(names)
        if name in names[:i]
    ]


def _variant_ref_issues(
    variants: tuple[Variant, ...], path_names: list[str]
) -> list[tuple[Loc, str]]:
    known = ", ".join(path_names)
    issues: list[tuple[Loc, str]] = []
    for i, v in enumerate(variants):
        if v.path is not None and v.path not in path_names:
            issues.append((("variants", i, "path"), f"no path named {v.path!r}; paths: {known}"))
        missing = [name for name in v.paths or () if name not in path_names]
        if missing:
            msg = f"no path named {missing[0]!r}; paths: {known}"
            issues.append((("variants", i, "paths"), msg))
        elif v.paths is not None and len(set(v.paths)) != len(v.paths):
            issues.append((("variants", i, "paths"), "names a path twice"))
    return issues


def _check_variant_refs(variants: tuple[Variant, ...], path_names: list[str]) -> None:
    issues = _variant_ref_issues(variants, path_names)
    if issues:
        raise SpecIssue.of(issues)


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
        _check_variant_refs(applied.variants, [p.name for p in applied.paths])
    except ValidationError as e:
        return f"value {_show(value)}: {describe_validation(e)}"
    except SpecIssue as e:
        return f"value {_show(value)}: {e.message}"
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


class _YamlProblem(Exception):
    """A problem found while reading the YAML text, at a 1-based line."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


# libyaml when present: composing a 100 KiB file takes 0.2 s instead of 2 s.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_LONG_NUMBER = re.compile(r"[-+]?[0-9_.,:]*[0-9][0-9_.,:eE+-]*")


def _scan_events(text: str) -> None:
    """Refuse aliases (no alias bombs), deep nesting and numbers too long to convert (a
    5000-digit integer) before anything is composed."""
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        line = event.start_mark.line + 1 if event.start_mark else None
        if isinstance(event, yaml.AliasEvent):
            raise _YamlProblem(line, "YAML aliases (*name) are not allowed; write the value out")
        if isinstance(event, yaml.ScalarEvent) and not event.style:
            _check_number_length(event.value, line)
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise _YamlProblem(line, f"nesting deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1


def _check_number_length(value: str, line: int | None) -> None:
    digits = sum(c.isdigit() for c in value)
    if digits > MAX_DIGITS and _LONG_NUMBER.fullmatch(value):
        msg = f"number with {digits} digits; numbers in a campaign have at most {MAX_DIGITS}"
        raise _YamlProblem(line, msg)


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
        data, lines = _read_yaml(_decode(text), filename)
    except _YamlProblem as e:
        raise SpecError(filename, e.line, "", _one_line(e.message)) from None
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as e:
        raise _spec_error(e, filename, lines, data) from None
    campaign._source = Source(filename, lines, data)
    return campaign


def _decode(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = _decode_bytes(text)
    bad_char = re.search(
        r"[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]", text
    )
    if bad_char:
        line = text.count("\n", 0, bad_char.start()) + 1
        code = ord(bad_char.group())
        raise _YamlProblem(line, f"control character U+{code:04X}: binary data, not YAML text")
    return text


def _decode_bytes(raw: bytes) -> str:
    if len(raw) > MAX_FILE_BYTES:
        raise _YamlProblem(None, f"file larger than {MAX_FILE_BYTES} bytes; not a campaign")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        bad = raw[e.start]
        msg = f"not UTF-8 text (byte 0x{bad:02x}): binary data or another encoding"
        raise _YamlProblem(line, f"{msg}; save campaigns as UTF-8 YAML") from None


def _read_yaml(text: str, filename: str) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    try:
        _scan_events(text)
        loader = _LOADER(text)
        try:
            node = _top_node(loader)
            return loader.construct_document(node), _line_map(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        raise _YamlProblem(*_yaml_error(e, text)) from None
    except yaml.YAMLError as e:
        raise _YamlProblem(None, f"YAML error: {e}") from None


def _top_node(loader: Any) -> yaml.MappingNode:
    node = loader.get_single_node()
    if node is None:
        raise _YamlProblem(None, "empty file; a campaign needs at least name, paths, variants")
    if not isinstance(node, yaml.MappingNode):
        kind = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
        line = node.start_mark.line + 1
        raise _YamlProblem(line, f"the top level must be a mapping (key: value), got {kind}")
    return node


def _yaml_error(e: yaml.MarkedYAMLError, text: str) -> tuple[int | None, str]:
    mark = e.problem_mark or e.context_mark
    line = mark.line + 1 if mark else None
    source = text.splitlines()[line - 1] if line and line <= len(text.splitlines()) else ""
    indent = source[: len(source) - len(source.lstrip(" \t"))]
    if "\t" in indent:
        return line, "tab character in indentation; indent with spaces"
    problem = e.problem or "invalid YAML"
    context = f"{e.context}, " if e.context else ""
    return line, f"YAML syntax error: {context}{problem}"


def _line_map(root: yaml.Node) -> dict[tuple[str | int, ...], int]:
    """Line of every key and list item, by location; raises on duplicate keys."""
    lines: dict[tuple[str | int, ...], int] = {(): root.start_mark.line + 1}
    todo: list[tuple[tuple[str | int, ...], yaml.Node]] = [((), root)]
    while todo:
        loc, node = todo.pop()
        for sub_loc, line, child in _children(loc, node):
            lines[sub_loc] = line
            todo.append((sub_loc, child))
    return lines


def _children(
    loc: tuple[str | int, ...], node: yaml.Node
) -> Iterator[tuple[tuple[str | int, ...], int, yaml.Node]]:
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield (*loc, i), item.start_mark.line + 1, item
    elif isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else f"<key@{line}>"
            if name in seen:
                raise _YamlProblem(line, f"duplicate key {name!r} (first at line {seen[name]})")
            seen[name] = line
            yield (*loc, name), line, value


# ---------------------------------------------------------------- validation messages


@dataclass(frozen=True)
class Source:
    """Where a campaign came from: its file name, the line of every key, the raw data
    (later stages, such as the plan, name file:line with it)."""

    filename: str
    lines: dict[Loc, int]  # location (keys and list indexes) -> 1-based line
    data: Any  # the YAML as constructed, before validation


def _spec_error(
    e: ValidationError, filename: str, lines: dict[tuple[str | int, ...], int], data: Any
) -> SpecError:
    issues: list[tuple[Loc, str]] = []
    errs = e.errors(include_url=False)
    for err in errs:
        loc = _clean_loc(err["loc"])
        if err["type"] == "too_short" and _has_inner(errs, loc):
            continue  # pydantic counts a tuple's invalid items as missing: said below
        issue = (err.get("ctx") or {}).get("error")
        if isinstance(issue, SpecIssue):
            issues += [(loc + sub, message) for sub, message in issue.issues]
        else:
            issues.append((loc, _describe(err, loc)))
    return issues_error(Source(filename, lines, data), issues)


def _has_inner(errs: list[Any], loc: Loc) -> bool:
    """Whether another error lies below `loc`."""
    return any(
        len(inner := _clean_loc(other["loc"])) > len(loc) and inner[: len(loc)] == loc
        for other in errs
    )


def issues_error(source: Source, issues: list[tuple[Loc, str]]) -> SpecError:
    """One SpecError listing every issue, by line, each as `file:line: field: message`."""
    located = dict.fromkeys((_as_written(loc, source.lines), message) for loc, message in issues)
    errors = [
        SpecError(
            source.filename,
            _line_for(loc, source.lines),
            _field_name(loc, source.data),
            _one_line(message),
        )
        for loc, message in located
    ]
    errors.sort(key=lambda one: one.line or 0)
    return SpecError.many(errors)


def _as_written(loc: Loc, lines: dict[Loc, int]) -> Loc:
    """`paths.<i>.rate_mbit` for a direction's field that the file gives at path level (the
    shorthand for both directions): one message, not one per direction."""
    if len(loc) == 4 and loc[0] == "paths" and loc[2] in ("down", "up") and loc not in lines:
        shorthand = (loc[0], loc[1], loc[3])
        if shorthand in lines:
            return shorthand
    return loc


def campaign_error(campaign: Campaign, issues: list[tuple[Loc, str]]) -> SpecError:
    """A SpecError for issues a later stage (the plan, the run's commands) found in a
    campaign: with file:line when the campaign was read from a file."""
    source = campaign._source or Source("<campaign>", {}, campaign.model_dump(mode="json"))
    return issues_error(source, issues)


def describe_validation(e: ValidationError, root: type[BaseModel] | None = None) -> str:
    """One line for the first error of a ValidationError: `field: message`."""
    err = e.errors(include_url=False)[0]
    loc = _clean_loc(err["loc"])
    issue = (err.get("ctx") or {}).get("error")
    if isinstance(issue, SpecIssue):
        loc, message = loc + issue.loc, issue.message
    else:
        message = _describe(err, loc, root or _model_of(e))
    return _one_line(f"{'.'.join(map(str, loc))}: {message}" if loc else message)


def _model_of(e: ValidationError) -> type[BaseModel]:
    models: dict[str, type[BaseModel]] = {
        m.__name__: m for m in (Campaign, Path, Direction, Variant, Traffic, Capture, Sweep)
    }
    return models.get(e.title, Campaign)


def _clean_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Drop pydantic's union-member tags (`tuple[...]`, `Range`) from a location."""
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and p not in _TAGS))


_TAGS = ("Range", "float", "int", "str")


def _describe(err: Any, loc: tuple[str | int, ...], root: type[BaseModel] = Campaign) -> str:
    kind, got = err["type"], _show(err.get("input"))
    if kind == "extra_forbidden":
        return f"unknown key; allowed: {', '.join(_allowed_keys(loc[:-1], root))}"
    if kind == "missing":
        on_direction = loc[-1:] in (("down",), ("up",))
        hint = " (give rate_mbit at path level or under down:/up:)" if on_direction else ""
        return f"required key missing{hint}"
    if kind in ("too_short", "too_long"):
        bound = "at least" if kind == "too_short" else "at most"
        limit = err["ctx"]["min_length" if kind == "too_short" else "max_length"]
        return f"must have {bound} {limit} item{'s' if limit != 1 else ''}, got {got}"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        pattern = str(err["ctx"]["pattern"])
        return f"must be {PATTERN_HELP.get(pattern, 'match ' + pattern)}, got {got}"
    message = str(err["msg"]).replace("Input should be", "must be")
    bounds = _bounds(loc, root)
    return f"{message}, got {got}" + (f" (allowed: {bounds})" if bounds else "")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _allowed_keys(loc: tuple[str | int, ...], root: type[BaseModel]) -> list[str]:
    model = _model_at(loc, root)
    if model is None:
        return []
    keys = list(model.model_fields)
    return keys + list(DIRECTION_FIELDS) if model is Path else keys


def _model_at(loc: tuple[str | int, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    model = root
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            continue  # a list index or a dict key: same model below
        inner = _inner_model(field.annotation)
        if inner is None:
            return None
        model = inner
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _field_info(loc: tuple[str | int, ...], root: type[BaseModel]) -> FieldInfo | None:
    names = [p for p in loc if isinstance(p, str)]
    if not names:
        return None
    model = _model_at(loc[: loc.index(names[-1])], root)
    return model.model_fields.get(names[-1]) if model else None


def _bounds(loc: tuple[str | int, ...], root: type[BaseModel]) -> str:
    """The allowed range of a numeric field, e.g. `>= 0 and <= 10000`."""
    info = _field_info(loc, root)
    if info is None:
        return ""
    ops = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    parts = [
        f"{ops[attr]} {getattr(m, attr):g}"
        for m in info.metadata
        for attr in ops
        if isinstance(getattr(m, attr, None), int | float)
    ]
    why = f": {info.description}" if parts and info.description else ""
    return " and ".join(parts) + why


def _line_for(loc: tuple[str | int, ...], lines: dict[tuple[str | int, ...], int]) -> int:
    """Line of the deepest part of loc that the file spells out (path shorthand included)."""
    shorthand = tuple(p for i, p in enumerate(loc) if not (i == 2 and p in ("down", "up")))
    for candidate in (loc, shorthand):
        if candidate in lines:
            return lines[candidate]
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return 1


def _field_name(loc: tuple[str | int, ...], data: Any) -> str:
    """`paths.wifi.down.delay_ms` (list items by name where they have one), `sweep.axes[k]`."""
    out = ""
    node = data
    for i, part in enumerate(loc):
        label = _item_label(node, part) if isinstance(part, int) else None
        if (isinstance(part, int) and label is None) or (i > 0 and loc[i - 1] == "axes"):
            out += f"[{part}]"
        else:
            out += f"{'.' if out else ''}{label or part}"
        node = _child(node, part)
    return out


def _item_label(node: Any, index: int) -> str | None:
    item = _child(node, index)
    name = item.get("name") if isinstance(item, dict) else None
    ok = isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,15}", name)
    return name if ok and isinstance(name, str) else None


def _child(node: Any, part: str | int) -> Any:
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    if isinstance(node, dict):
        return node.get(part)
    return None
