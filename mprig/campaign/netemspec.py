"""Campaign keys of a path direction's queue and loss model (issue 18 part 5): the AQM that
holds the path's queue, netem's jitter distribution and Gilbert-Elliott (bursty) loss.

Kept apart from mprig/campaign/spec.py, whose `Direction` inherits these fields from `QueueKnobs`
and raises the (location, message) pairs `direction_issues` returns for the checks that
span its own fields. Every key defaults to "off", and `hashed` leaves keys at their
default out of a run's parameters, so adding them kept every earlier run id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

_PCT = "a percentage of packets"
_STATE = "a per-packet transition probability, percent"

Aqm = Literal["pfifo", "fq_codel", "cake"]
JitterDist = Literal["uniform", "normal", "pareto", "paretonormal"]


class QueueKnobs(BaseModel):
    """The queue discipline and loss model of one direction (fields of spec.Direction)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # The queue discipline where the queue builds (behind the rate shaper): pfifo, fq_codel
    # or cake, holding limit_pkts; None: netem's own queue shapes the rate (mprig/run/aqm.py)
    aqm: Aqm | None = None
    # netem's delay distribution for jitter_ms (None and uniform: netem's uniform default)
    jitter_dist: JitterDist | None = None
    # Gilbert-Elliott loss (netem `loss gemodel p r 1-h 1-k`): per-packet probability of
    # going from the good to the bad state, percent; 0: off
    ge_p_pct: float = Field(default=0, ge=0, le=100, description=_STATE)
    ge_r_pct: float = Field(default=0, ge=0, le=100, description=_STATE)  # bad -> good
    # loss probability in the bad state (1-h) and in the good state (1-k), percent
    ge_bad_loss_pct: float = Field(default=100, ge=0, le=100, description=_PCT)
    ge_good_loss_pct: float = Field(default=0, ge=0, le=100, description=_PCT)


FIELDS: tuple[str, ...] = tuple(QueueKnobs.model_fields)
GE_FIELDS = ("ge_p_pct", "ge_r_pct", "ge_bad_loss_pct", "ge_good_loss_pct")
DEFAULTS: dict[str, Any] = {k: f.default for k, f in QueueKnobs.model_fields.items()}


class _Netem(Protocol):
    """What the checks read of a spec.Direction."""

    @property
    def jitter_ms(self) -> float: ...
    @property
    def loss_pct(self) -> float: ...
    @property
    def jitter_dist(self) -> JitterDist | None: ...
    @property
    def ge_p_pct(self) -> float: ...
    @property
    def ge_r_pct(self) -> float: ...
    @property
    def ge_bad_loss_pct(self) -> float: ...
    @property
    def ge_good_loss_pct(self) -> float: ...


def ge_on(d: _Netem) -> bool:
    """Whether the direction asks for Gilbert-Elliott loss."""
    return bool(d.ge_p_pct)


def direction_issues(d: _Netem) -> list[tuple[tuple[str], str]]:
    """(field, message) for every combination netem cannot carry out as written."""
    issues: list[tuple[tuple[str], str]] = []
    if d.jitter_dist not in (None, "uniform") and not d.jitter_ms:
        issues.append((("jitter_dist",), "shapes jitter: set jitter_ms > 0"))
    if ge_on(d) and d.loss_pct:
        why = "netem takes one loss model: give loss_pct (random) or ge_p_pct (Gilbert-Elliott)"
        issues.append((("loss_pct",), why))
    if ge_on(d) and not d.ge_r_pct:
        why = "needs ge_r_pct > 0 (bad -> good), or the path stays in the bad state"
        issues.append((("ge_p_pct",), why))
    if not ge_on(d):
        issues += [
            ((k,), "is a Gilbert-Elliott parameter: set ge_p_pct > 0 (good -> bad)")
            for k in GE_FIELDS[1:]
            if getattr(d, k) != DEFAULTS[k]
        ]
    return issues


def wifi_model_issues(down: _Netem, up: _Netem) -> list[tuple[tuple[str, str], str]]:
    """A Wi-Fi path with distance_m gets its loss from the channel model (a random loss
    rate, mprig/campaign/wifi.py): Gilbert-Elliott loss would be a second loss model."""
    return [
        ((name, "ge_p_pct"), "the Wi-Fi channel model sets this path's loss (distance_m)")
        for name, d in (("down", down), ("up", up))
        if ge_on(d)
    ]


def ge_mean_loss_pct(d: _Netem) -> float:
    """The long-run loss rate of the Gilbert-Elliott chain, percent: the bad state's share
    p / (p + r) times its loss, plus the good state's share times its loss."""
    if not ge_on(d):
        return 0.0
    bad = d.ge_p_pct / (d.ge_p_pct + d.ge_r_pct)
    return bad * d.ge_bad_loss_pct + (1 - bad) * d.ge_good_loss_pct


def hashed(path: Mapping[str, Any]) -> dict[str, Any]:
    """A path's JSON for its run id: the queue keys left at their default left out."""
    out = dict(path)
    for name in ("down", "up"):
        if isinstance(out.get(name), Mapping):
            out[name] = {k: v for k, v in out[name].items() if not _default(k, v)}
    return out


def _default(key: str, value: Any) -> bool:
    return key in DEFAULTS and value == DEFAULTS[key]
