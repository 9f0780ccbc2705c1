"""Campaign schema of cross traffic and shared bottlenecks (issue 18 part 3).

`paths[].cross_traffic` lists competing flows that cross one path beside the run's own
traffic; `shared_bottleneck` makes several paths converge on one shaped link, so the
subflows of one MPTCP connection and competing flows share a queue and a rate (the
setting where coupled congestion control's fairness is defined, RFC 6356). Kept apart
from mprig/campaign/spec.py, which imports these models into its Path and Campaign.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,15}$")]
Token = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]

MAX_FLOWS = 8  # competing flows per path: 8 paths x 8 flows keep to 64 ports
_RATE = "100 Gbit/s is beyond any link a rig or netem carries"
_TIME = "a day: a run's traffic lasts at most 86400 s"
_PERIOD = "an hour on or off"
_DELAY = "10 s one way is beyond any real path, satellite included"
_LIMIT = "a million 1500-byte packets is 1.5 GB of queue memory per direction"
MIN_PERIOD_S = 0.1  # the flow program's clock tick: shorter periods would not be kept


class _Strict(BaseModel):
    """As spec.StrictModel (unknown keys are errors, instances immutable)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class CrossFlow(_Strict):
    """One competing flow across a path: bulk TCP with its own congestion control, or UDP
    at a constant rate, optionally switched on and off."""

    kind: Literal["tcp", "udp"]  # tcp: bulk transfer; udp: constant bit rate
    cc: Token | None = None  # tcp: the sender's congestion control (default cubic)
    # udp: sending rate of application bytes, Mbit/s
    rate_mbit: float | None = Field(default=None, gt=0, le=100_000, description=_RATE)
    # who sends: download (the server) or upload (the client); default: the run's direction
    direction: Literal["download", "upload"] | None = None
    start_s: float = Field(default=0, ge=0, le=86_400, description=_TIME)  # first byte, s
    # last byte, s after the flow program starts; None: until the run's traffic ends
    stop_s: float | None = Field(default=None, gt=0, le=86_400, description=_TIME)
    # on-off: sending periods of on_s seconds separated by off_s seconds of silence
    on_s: float | None = Field(default=None, ge=MIN_PERIOD_S, le=3_600, description=_PERIOD)
    off_s: float | None = Field(default=None, ge=MIN_PERIOD_S, le=3_600, description=_PERIOD)

    @model_validator(mode="after")
    def _consistent(self) -> CrossFlow:
        problem = _flow_problem(self)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def congestion(self) -> str:
        """The tcp sender's congestion control ("" for udp)."""
        return (self.cc or "cubic") if self.kind == "tcp" else ""


def _flow_problem(f: CrossFlow) -> str:
    """Why a flow's keys do not go together ("" when they do)."""
    if f.kind == "udp" and f.rate_mbit is None:
        return "a udp flow needs rate_mbit (its sending rate)"
    if f.kind == "udp" and f.cc is not None:
        return "cc is for tcp flows; udp has no congestion control"
    if f.kind == "tcp" and f.rate_mbit is not None:
        return "rate_mbit is for udp flows; a tcp flow sends as fast as its cc allows"
    if (f.on_s is None) != (f.off_s is None):
        return "on_s and off_s go together: give both for an on-off flow, or neither"
    if f.stop_s is not None and f.stop_s <= f.start_s:
        return f"stop_s ({f.stop_s:g}) must be after start_s ({f.start_s:g})"
    return ""


class SharedBottleneck(_Strict):
    """Paths that converge on one shaped link on the server's side (both directions):
    their traffic shares one queue of `limit_pkts` at `rate_mbit`."""

    paths: tuple[Name, ...] = Field(min_length=2, max_length=8)  # the paths that share it
    rate_mbit: float = Field(gt=0, le=100_000, description=_RATE)  # the shared rate, Mbit/s
    delay_ms: float = Field(default=0, ge=0, le=10_000, description=_DELAY)  # one way, ms
    limit_pkts: int = Field(default=1000, ge=1, le=1_000_000, description=_LIMIT)  # packets


Loc = tuple[str | int, ...]


def bottleneck_issues(
    b: SharedBottleneck | None, paths: Sequence[Any], inventory: str = "virtual"
) -> list[tuple[Loc, str]]:
    """Problems of a shared bottleneck's path names (`paths`: the campaign's spec.Path
    models) and rig (spec.Campaign's cross-reference check)."""
    if b is None:
        return []
    path_names = [str(p.name) for p in paths]
    if inventory != "virtual":
        why = "the virtual rig builds a shared bottleneck; a lab's shared link is its hardware"
        return [(("shared_bottleneck",), why)]
    loc: Loc = ("shared_bottleneck", "paths")
    missing = [n for n in b.paths if n not in path_names]
    if missing:
        return [(loc, f"no path named {missing[0]!r}; paths: {', '.join(path_names)}")]
    if len(set(b.paths)) != len(b.paths):
        return [(loc, "names a path twice; a shared bottleneck joins two or more paths")]
    return []
