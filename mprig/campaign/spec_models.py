"""Campaign spec, the section models: a path and its two directions, a variant, the
traffic, the capture, the rig and the sweep (pydantic v2). The top-level Campaign that
holds them, its cross-checks and the loader live in mprig/campaign/spec.py.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from mprig.campaign import apps_spec, netemspec, presets
from mprig.campaign.crossspec import CrossFlow
from mprig.campaign.ipfamily import DEFAULT as DEFAULT_FAMILY
from mprig.campaign.ipfamily import Family
from mprig.campaign.ns3spec import ns3_issue
from mprig.campaign.spec_base import (
    BLOCK_BYTES_DEFAULT,
    MIN_SNAPLEN,
    WHY_BLOCK,
    WHY_BUFFER,
    WHY_BYTES,
    WHY_DELAY,
    WHY_DISTANCE,
    WHY_DURATION,
    WHY_INTERVAL,
    WHY_LIMIT,
    WHY_OMIT,
    WHY_PCT,
    WHY_PING,
    WHY_RATE,
    WHY_SNAPLEN,
    ChannelModel,
    Loc,
    Name,
    SpecIssue,
    StrictModel,
    SysctlKey,
    SysctlValue,
    Token,
    show,
)
from mprig.campaign.spec_describe import describe_validation
from mprig.campaign.timeline_spec import TraceRef, fill_trace_rate
from mprig.errors import UsageError


class Direction(netemspec.QueueKnobs, StrictModel):
    """Impairment of one direction of a path (applied with tc netem on its router); the
    queue discipline and loss model fields come from netemspec.QueueKnobs."""

    rate_mbit: float = Field(gt=0, le=100_000, description=WHY_RATE)  # bottleneck rate, Mbit/s
    delay_ms: float = Field(default=0, ge=0, le=10_000, description=WHY_DELAY)  # one-way delay
    jitter_ms: float = Field(default=0, ge=0, le=10_000, description=WHY_DELAY)  # delay jitter
    loss_pct: float = Field(default=0, ge=0, le=100, description=WHY_PCT)  # random loss
    # percent of packets netem sends at once, ahead of the delayed ones (needs delay_ms > 0)
    reorder_pct: float = Field(default=0, ge=0, le=100, description=WHY_PCT)
    limit_pkts: int = Field(default=1000, ge=1, le=1_000_000, description=WHY_LIMIT)  # packets

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
    distance_m: float | None = Field(default=None, gt=0, le=10_000, description=WHY_DISTANCE)
    wifi_standard: Literal["11b", "11g"] | None = None  # wifi: PHY used by the channel model
    # wifi: the channel model's calibration (mprig/campaign/wifi.py CALIBRATIONS); None: the default
    channel_model: ChannelModel | None = None
    # what carries the path on the virtual rig: netem (the channel model's rate and loss) or
    # ns3 (a real-time ns-3 802.11 link between the namespaces, docs/ns3-engine.md)
    engine: Literal["netem", "ns3"] = "netem"
    trace: TraceRef | None = None  # a Mahimahi trace replayed as the rate (timeline_spec.py)
    # competing flows across this path (mprig/campaign/crossspec.py, docs/campaign.md)
    cross_traffic: tuple[CrossFlow, ...] = Field(default=(), max_length=8)
    family: Family = DEFAULT_FAMILY  # ipv4 or ipv6 addresses (mprig/campaign/ipfamily.py)
    # keys accepted besides the fields: a direction's, given once for both (_shorthand)
    shorthand_fields: ClassVar[tuple[str, ...]] = DIRECTION_FIELDS

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
    rmem: int | None = Field(default=None, ge=4096, le=1 << 30, description=WHY_BUFFER)
    wmem: int | None = Field(default=None, ge=4096, le=1 << 30, description=WHY_BUFFER)
    # where the buffers start before autotuning (tcp_rmem's, tcp_wmem's middle value; in
    # Linux 6.1 an MPTCP connection's send buffer starts there and then grows only to its
    # largest subflow's), bytes; each needs its maximum above
    rmem_initial: int | None = Field(default=None, ge=4096, le=1 << 30, description=WHY_BUFFER)
    wmem_initial: int | None = Field(default=None, ge=4096, le=1 << 30, description=WHY_BUFFER)

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
    def _initial_buffers(self) -> Variant:
        for name in ("rmem", "wmem"):
            initial, size = getattr(self, f"{name}_initial"), getattr(self, name)
            if initial is None:
                continue
            if size is None:
                raise SpecIssue((f"{name}_initial",), f"needs `{name}:`, the maximum it is under")
            if initial > size:
                raise SpecIssue(
                    (f"{name}_initial",), f"{initial} is over `{name}: {size}`, its maximum"
                )
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
    duration_s: float = Field(default=10, ge=1, le=86_400, description=WHY_DURATION)
    omit_s: float = Field(default=0, ge=0, le=3_600, description=WHY_OMIT)  # iperf3 -O
    # bulk: size, sha256 checked
    bytes: int | None = Field(default=None, gt=0, le=1 << 40, description=WHY_BYTES)
    # blocks: size of each block written (None for the other tools: 8192 for blocks)
    block_bytes: int | None = Field(default=None, ge=16, le=1_000_000, description=WHY_BLOCK)
    # blocks: pause after each block, ms (None for the other tools: 0 for blocks)
    interval_ms: float | None = Field(default=None, ge=0, le=60_000, description=WHY_INTERVAL)
    requests: apps_spec.Requests | None = (
        None  # requests: mprig/campaign/apps_spec.py, docs/campaign.md
    )
    cbr: apps_spec.Cbr | None = None  # cbr: the stream's rate, frames and deadline
    # latency probe: an ICMP echo from the client over every path each this many ms, during
    # the whole run (mprig/run/latency.py); None: no probe
    ping_interval_ms: float | None = Field(default=None, ge=10, le=10_000, description=WHY_PING)

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
    snaplen: int = Field(default=200, ge=MIN_SNAPLEN, le=262_144, description=WHY_SNAPLEN)

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
        msg = f"must be a list of values or a range {{start, stop, step}}, got {show(spec)}"
        raise SpecIssue((key,), msg)
    try:
        return Range.model_validate(spec)
    except ValidationError as e:
        raise SpecIssue((key,), f"range: {describe_validation(e, Range)}") from None


# ---------------------------------------------------------------- cross-reference checks


def unique_issues(section: str, names: list[str]) -> list[tuple[Loc, str]]:
    return [
        ((section, i, "name"), f"duplicate name {name!r}")
        for i, name in enumerate(names)
        if name in names[:i]
    ]


def variant_ref_issues(
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


def check_variant_refs(variants: tuple[Variant, ...], path_names: list[str]) -> None:
    issues = variant_ref_issues(variants, path_names)
    if issues:
        raise SpecIssue.of(issues)
