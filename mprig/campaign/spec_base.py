"""Campaign spec, the shared base: the names, limits and base model every spec module uses.

Kept apart so the section models (spec_models.py), the YAML reader (spec_yaml.py) and the
error messages (spec_describe.py) share one StrictModel and one SpecIssue without importing
the top-level Campaign (mprig/campaign/spec.py), which imports them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from mprig.campaign import sysctl_keys

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
WHY_RATE = "100 Gbit/s is beyond any link a rig or netem carries"
WHY_DELAY = "10 s one way is beyond any real path, satellite included"
WHY_PCT = "a percentage of packets"
WHY_LIMIT = "a million 1500-byte packets is 1.5 GB of queue memory per direction"
WHY_DISTANCE = "the 802.11 model's range; links die within a few hundred metres"
WHY_BUFFER = "4096 is the kernel's minimum buffer; 1 GiB its largest window"
WHY_DURATION = (
    "iperf3 counts whole seconds and treats -t 0 as forever; a bulk transfer must end within it"
)
WHY_OMIT = "an hour of warm-up"
WHY_BYTES = "1 TiB"
WHY_BLOCK = (
    "16 bytes carry the block's number and send time; 1 MB is far past any application write"
)
WHY_INTERVAL = "a block a minute; 0 writes back to back"
WHY_PING = "100 probes a second per path at most (they load the path too); one each 10 s at least"
BLOCK_BYTES_DEFAULT = 8192  # paper 004 Fig. 7: 8 KB blocks
WHY_SNAPLEN = (
    "Linux cooked header 20 + IPv4 header up to 60 + TCP header with the full 40 bytes of"
    " options 60, so every MPTCP option (DSS) is captured"
)
WHY_REPETITIONS = "with sweep points and variants, a plan has at most 100000 runs"
WHY_SEED = "a 32-bit seed"


# Calibrations of the Wi-Fi channel model, one per paper (mprig/campaign/wifi.py CALIBRATIONS).
ChannelModel = Literal["ns3-default", "paper000", "paper003"]


@dataclass(frozen=True)
class Source:
    """Where a campaign came from: its file name, the line of every key, the raw data
    (later stages, such as the plan, name file:line with it)."""

    filename: str
    lines: dict[Loc, int]  # location (keys and list indexes) -> 1-based line
    data: Any  # the YAML as constructed, before validation


def show(value: object) -> str:
    """A value as an error message quotes it: its repr, cut at 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def one_line(text: str) -> str:
    """A message on one line: a SpecError is one line per problem."""
    return " ".join(text.split())
