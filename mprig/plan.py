"""Plan: expand a campaign's sweep, variants and repetitions into an ordered run table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mprig.spec import Capture, Path, Traffic, Variant


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
