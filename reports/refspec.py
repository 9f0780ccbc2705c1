"""Reference files (reports/references/*.yaml): their schema, and loading them with
file:line errors. The checking against results is reports/references.py."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from mprig.errors import SpecError

REFERENCES_DIR = Path(__file__).parent / "references"
RefId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{2,95}$")]
Scalar = float | int | str | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Range(_Strict):
    """A numeric condition: min <= value <= max (either bound optional)."""

    min: float | None = None
    max: float | None = None


Condition = Scalar | list[Scalar] | Range  # one value, any of several, or a range


# Metrics whose values can fall below 0; every other one is a rate, size, count or share.
SIGNED_METRICS = frozenset({"delay_diff_ms"})


class Tolerance(_Strict):
    """How far ours may be from the paper's, and why that far."""

    abs: float | None = Field(default=None, ge=0)  # |ours - paper| <= abs (reference's unit)
    rel: float | None = Field(default=None, ge=0)  # |ours - paper| <= rel * |paper|
    spread: float | None = Field(default=None, gt=0)  # <= spread x our run-to-run SD
    # where the width comes from: the paper's own spread, our measured spread, the
    # resolution of a figure or text it was read off, or arithmetic on configured values
    basis: Literal["paper", "measured", "reading", "arithmetic"]
    why: str = Field(min_length=10)  # the reason, in words

    @model_validator(mode="after")
    def _one(self) -> Tolerance:
        if sum(x is not None for x in (self.abs, self.rel, self.spread)) != 1:
            raise ValueError("give exactly one of abs, rel or spread")
        return self

    def bound(self, value: float, sd: float = math.nan) -> float:
        """The half-width of the window around VALUE (NaN: spread-based, SD unknown)."""
        if self.abs is not None:
            return self.abs
        if self.rel is not None:
            return self.rel * abs(value)
        return (self.spread or 0.0) * sd

    def __str__(self) -> str:
        if self.abs is not None:
            return f"±{self.abs:g}"
        if self.rel is not None:
            return f"±{self.rel * 100:g} %"
        return f"±{self.spread:g} SD"


class Requires(_Strict):
    """Stack features a reference needs; checked against the hosts' facts in run.json."""

    congestion_control: tuple[str, ...] = ()  # any one of these must be available


class Paper(_Strict):
    """The paper a file's references come from."""

    # id in shared PAPERS.md (000..004); `seed`, its old name, is still read: committed
    # files and users' own reference files were written with it (issue 20 part 3)
    id: str = Field(pattern=r"^[0-9]{3}$", validation_alias=AliasChoices("id", "seed"))
    title: str
    cite: str = ""  # authors, venue, year


class Reference(_Strict):
    """One published number."""

    id: RefId
    source: str  # "Table III", "Fig. 9", "text (scenario 1)"
    setup: str = ""  # the paper's setup for this number, in words
    conditions: dict[str, Condition] = Field(default_factory=dict)  # runs it applies to
    metric: str  # our runs.parquet column
    scale: float = 1.0  # ours x scale = the paper's unit (ooo_ratio x 100 -> %)
    aggregate: Literal["mean", "median", "max", "min"] = "mean"  # per repetition, over runs
    relative_to: dict[str, Condition] | None = None  # ours = agg(conditions) / agg(these)
    relation: Literal["ratio", "gain_pct"] = "ratio"  # with relative_to: x or (x - 1) x 100
    kind: Literal["value", "at_most", "at_least"] = "value"  # bounds: "never above 15"
    unit: str
    value: float
    tolerance: str | None = None  # a name from the file's `tolerances`; default the file's
    floor: float | None = None  # at_most: the window's lower end (paper's unit)
    floor_capacity: float | None = Field(default=None, gt=0, le=1)  # or this x capacity
    ceiling: float | None = None  # at_least: the window's upper end (paper's unit)
    no_effect: float | None = None  # default: 0 (a value, a gain in %), 1 (a ratio)
    requires: Requires = Requires()
    note: str = ""  # what the rig cannot reproduce, and why

    @model_validator(mode="after")
    def _two_sided(self) -> Reference:
        if self.kind == "at_most" and self.floor is None and self.floor_capacity is None:
            raise ValueError("an at_most bound needs a sanity floor (floor or floor_capacity)")
        if self.kind == "at_least" and self.ceiling is None:
            raise ValueError("an at_least bound needs a ceiling")
        if self.floor_capacity is not None and self.relative_to is not None:
            raise ValueError("floor_capacity is for a rate, not a ratio: give floor")
        return self

    @property
    def nonnegative(self) -> bool:
        """Whether the compared quantity cannot be below 0: every metric but a signed one,
        and a ratio of two; a gain in % can."""
        gain = self.relative_to is not None and self.relation == "gain_pct"
        return not gain and self.metric not in SIGNED_METRICS

    @property
    def null_value(self) -> float:
        """The value that means "no effect": 0, or 1 for a ratio."""
        if self.no_effect is not None:
            return self.no_effect
        return 1.0 if self.relative_to is not None and self.relation == "ratio" else 0.0


class ReferenceFile(_Strict):
    """A references YAML file: one paper, its named tolerances, its numbers."""

    paper: Paper
    tolerances: dict[str, Tolerance] = Field(min_length=1)  # name -> width and reason
    tolerance: str  # the default tolerance's name
    references: tuple[Reference, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> ReferenceFile:
        for name in (self.tolerance, *(r.tolerance for r in self.references if r.tolerance)):
            if name not in self.tolerances:
                known = ", ".join(self.tolerances)
                raise ValueError(f"tolerance {name!r} is not in tolerances ({known})")
        return self


@dataclass(frozen=True)
class Entry:
    """A loaded reference with its paper, effective tolerance and location."""

    ref: Reference
    paper: Paper
    tolerance: Tolerance
    where: str  # file:line


# --- loading -----------------------------------------------------------------------------


def _line_map(node: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    import yaml

    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines.update(_line_map(value, (*path, key.value)))
            lines[(*path, key.value)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            lines.update(_line_map(value, (*path, i)))
    return lines


def _line_of(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    for end in range(len(loc), -1, -1):
        if tuple(loc[:end]) in lines:
            return lines[tuple(loc[:end])]
    return None


def load_file(path: Path) -> list[Entry]:
    """Read and validate one references file; errors name file:line and the field."""
    import yaml

    text = path.read_text()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 10x faster
    try:
        node = yaml.compose(text, Loader=loader)
        data = yaml.load(text, Loader=loader)  # a safe loader (CSafeLoader or SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise SpecError(str(path), mark.line + 1 if mark else None, "", f"invalid YAML: {e}") from e
    lines = _line_map(node) if node is not None else {}
    try:
        doc = ReferenceFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        field = ".".join(str(p) for p in loc)
        raise SpecError(str(path), _line_of(lines, loc), field, err["msg"]) from e
    return [
        Entry(
            r,
            doc.paper,
            doc.tolerances[r.tolerance or doc.tolerance],
            f"{path}:{lines.get(('references', i))}",
        )
        for i, r in enumerate(doc.references)
    ]


def load_all(directory: Path = REFERENCES_DIR) -> dict[str, Entry]:
    """Every reference of every *.yaml in DIRECTORY, by id; duplicate ids are an error."""
    entries: dict[str, Entry] = {}
    for path in sorted(directory.glob("*.yaml")):
        for entry in load_file(path):
            if entry.ref.id in entries:
                raise SpecError(
                    entry.where,
                    None,
                    "id",
                    f"duplicate reference id {entry.ref.id!r}, "
                    f"first at {entries[entry.ref.id].where}",
                )
            entries[entry.ref.id] = entry
    return entries


def select(patterns: tuple[str, ...] | list[str], entries: dict[str, Entry]) -> list[str]:
    """Reference ids named by a campaign: exact ids or shell patterns (`000-t3-50m-*`)."""
    chosen: list[str] = []
    for pattern in patterns:
        hits = sorted(fnmatch.filter(entries, pattern)) or [pattern]
        chosen += [h for h in hits if h not in chosen]
    return chosen
