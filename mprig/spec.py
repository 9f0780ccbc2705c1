"""Campaign spec: the YAML schema of an mprig campaign (pydantic v2).

This module holds the models only; loading YAML with file:line errors lives in
`load_campaign` below (see `mprig.errors.SpecError`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,15}$")]
"""A path or variant name: lower case, digits, underscore; safe in ids, files and shells."""

CampaignName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


class StrictModel(BaseModel):
    """Base of every spec model: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Direction(StrictModel):
    """Impairment of one direction of a path (applied with tc netem on its router)."""

    rate_mbit: float = Field(gt=0, le=100_000)  # bottleneck rate, Mbit/s
    delay_ms: float = Field(default=0, ge=0, le=10_000)  # one-way delay, ms
    jitter_ms: float = Field(default=0, ge=0, le=10_000)  # delay jitter, ms
    loss_pct: float = Field(default=0, ge=0, le=100)  # random loss, percent of packets
    limit_pkts: int = Field(default=1000, ge=1, le=1_000_000)  # netem queue limit, packets


class Path(StrictModel):
    """One network path between client and server (one client interface, one router)."""

    name: Name  # e.g. wifi, cell, wired1
    kind: Literal["wifi", "cellular", "wired"]  # decides the client interface name
    down: Direction  # server -> client direction
    up: Direction  # client -> server direction
    distance_m: float | None = Field(default=None, gt=0, le=10_000)  # wifi: distance to the AP
    wifi_standard: Literal["11b", "11g"] | None = None  # wifi: PHY used by the channel model


class Variant(StrictModel):
    """A named stack configuration: protocol, congestion control, MPTCP knobs, sysctls."""

    name: Name
    protocol: Literal["mptcp", "tcp"] = "mptcp"
    path: Name | None = None  # tcp: the one path it uses (required for tcp)
    paths: tuple[Name, ...] | None = None  # mptcp: paths with a subflow endpoint (default all)
    cc: str = "cubic"  # net.ipv4.tcp_congestion_control
    scheduler: str | None = None  # net.mptcp.scheduler, where the kernel has it
    path_manager: str = "kernel"  # net.mptcp.pm_type: kernel | userspace
    recovery: str | None = None  # reordering-recovery preset (nopr, dsack, frto, eifel)
    sysctls: dict[str, str] = Field(default_factory=dict)  # extra sysctls, client and server
    rmem: int | None = Field(default=None, ge=4096, le=1 << 30)  # receive buffer max, bytes
    wmem: int | None = Field(default=None, ge=4096, le=1 << 30)  # send buffer max, bytes


class Traffic(StrictModel):
    """What a run sends."""

    tool: Literal["iperf3", "bulk"] = "iperf3"
    direction: Literal["download", "upload"] = "download"  # download: server sends
    duration_s: float = Field(default=10, gt=0, le=86_400)  # iperf3 -t
    omit_s: float = Field(default=0, ge=0, le=3_600)  # iperf3 -O
    bytes: int | None = Field(default=None, gt=0, le=1 << 40)  # bulk: size, sha256 checked


class Capture(StrictModel):
    """Packet capture settings."""

    enabled: bool = True
    hosts: tuple[Literal["client", "server"], ...] = ("client", "server")
    snaplen: int = Field(default=200, ge=96, le=262_144)  # bytes kept per packet


class RigRef(StrictModel):
    """Which rig runs the campaign."""

    inventory: str = "virtual"  # "virtual" or a path to an Ansible inventory
    mode: Literal["auto", "native", "vm"] = "auto"  # virtual rig: VM mode choice


class Range(StrictModel):
    """An inclusive numeric range for a sweep axis: start, stop, step."""

    start: float
    stop: float
    step: float = Field(gt=0)


class Sweep(StrictModel):
    """Axes to sweep. An axis names a field: `paths.<name>.<field>` (both directions),
    `paths.<name>.down.<field>`, `variants.<field>` (every variant) or
    `variants.<name>.<field>`; its values are a list or a range."""

    mode: Literal["cartesian", "zip"] = "cartesian"
    axes: dict[str, tuple[float | int | str, ...] | Range]


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
    repetitions: int = Field(default=1, ge=1, le=1000)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    order: Literal["sequential", "shuffle"] = "sequential"
    references: tuple[str, ...] = ()  # reports/references entries this campaign reproduces
