"""Published numbers (reports/references/*.yaml) and their comparison with a campaign's.

A reference names the paper, the table or figure, the conditions under which the paper
measured it (matched against each run's variant and sweep point), our metric and how to
scale it into the paper's unit, the value and a tolerance. `check()` turns a reference
and a campaign's results into a verdict: within tolerance, outside, or not comparable with
the reason.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mprig.errors import SpecError, UsageError
from reports.results import Results, short_axis

if TYPE_CHECKING:
    import pandas as pd

REFERENCES_DIR = Path(__file__).parent / "references"
RefId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{2,95}$")]
Scalar = float | int | str | bool
COUPLED_CC = frozenset({"lia", "olia", "balia", "wvegas", "fully_coupled"})  # multipath-aware


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Range(_Strict):
    """A numeric condition: min <= value <= max (either bound optional)."""

    min: float | None = None
    max: float | None = None


Condition = Scalar | list[Scalar] | Range  # one value, any of several, or a range


class Tolerance(_Strict):
    """How far ours may be from the paper's: absolute (in the reference's unit) or relative."""

    abs: float | None = Field(default=None, ge=0)  # |ours - paper| <= abs
    rel: float | None = Field(default=None, ge=0)  # |ours - paper| <= rel * |paper|

    @model_validator(mode="after")
    def _one(self) -> Tolerance:
        if (self.abs is None) == (self.rel is None):
            raise ValueError("give exactly one of abs or rel")
        return self

    def bound(self, value: float) -> float:
        return self.abs if self.abs is not None else (self.rel or 0.0) * abs(value)

    def __str__(self) -> str:
        return f"±{self.abs:g}" if self.abs is not None else f"±{(self.rel or 0) * 100:g} %"


class Requires(_Strict):
    """Stack features a reference needs; checked against the hosts' facts in run.json."""

    congestion_control: tuple[str, ...] = ()  # any one of these must be available


class Paper(_Strict):
    """The paper a file's references come from."""

    seed: str = Field(pattern=r"^[0-9]{3}$")  # id in shared PAPERS.md
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
    aggregate: Literal["mean", "median", "max", "min"] = "mean"  # over matching runs
    relative_to: dict[str, Condition] | None = None  # ours = agg(conditions) / agg(these)
    relation: Literal["ratio", "gain_pct"] = "ratio"  # with relative_to: x or (x - 1) x 100
    kind: Literal["value", "at_most", "at_least"] = "value"  # bounds: "never above 15"
    unit: str
    value: float
    tolerance: Tolerance | None = None  # default: the file's tolerance
    requires: Requires = Requires()
    note: str = ""  # what the rig cannot reproduce, and why


class ReferenceFile(_Strict):
    """A references YAML file: one paper, a default tolerance, its numbers."""

    paper: Paper
    tolerance: Tolerance
    references: tuple[Reference, ...] = Field(min_length=1)


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
        Entry(r, doc.paper, r.tolerance or doc.tolerance, f"{path}:{lines.get(('references', i))}")
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


# --- checking ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """Ours next to the paper's."""

    id: str
    entry: Entry | None  # None: the campaign named an unknown id
    ours: float | None  # in the paper's unit
    n: int  # runs that went into ours
    verdict: Literal["within", "outside", "not comparable"]
    reason: str = ""

    @property
    def difference(self) -> float | None:
        if self.ours is None or self.entry is None:
            return None
        return self.ours - self.entry.ref.value


def _variant_paths(variant: dict[str, Any], paths: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if variant.get("protocol") == "tcp" and variant.get("path"):
        names = {variant["path"]}
    else:
        names = set(variant.get("paths") or [p["name"] for p in paths])
    return [p for p in paths if p.get("name") in names]


def rcvbuf_rule_bytes(paths: list[dict[str, Any]], direction: str = "download") -> float:
    """Seed 004's receive buffer rule: 2 x sum of path rates x the largest round trip."""
    key = "down" if direction == "download" else "up"
    rate_bps = sum(float(p[key]["rate_mbit"]) * 1e6 for p in paths)
    rtt_s = max(
        (float(p["down"].get("delay_ms", 0)) + float(p["up"].get("delay_ms", 0))) / 1000
        for p in paths
    )
    return 2 * rate_bps / 8 * rtt_s


def _derived(
    variant: dict[str, Any], paths: list[dict[str, Any]], direction: str
) -> dict[str, Any]:
    used = _variant_paths(variant, paths)
    if not used:
        return {}
    return {
        "path_kinds": "+".join(sorted(str(p.get("kind")) for p in used)),
        "rcvbuf_rule_bytes": rcvbuf_rule_bytes(used, direction),
    }


PATH_FIELDS = ("distance_m", "wifi_standard", "kind")  # path-level facts
DIRECTION_FIELDS = ("rate_mbit", "delay_ms", "jitter_ms", "loss_pct")  # of the down direction


def _path_facts(paths: list[dict[str, Any]]) -> dict[str, Any]:
    """`path.<name>.<field>` for fixed path settings (a condition on distance_m matches
    them when no sweep axis names it)."""
    out = {}
    for p in paths:
        for key in PATH_FIELDS:
            if p.get(key) is not None:
                out[f"path.{p['name']}.{key}"] = p[key]
        for key in DIRECTION_FIELDS:
            if (p.get("down") or {}).get(key) is not None:
                out[f"path.{p['name']}.{key}"] = p["down"][key]
    return out


def _facts(results: Results) -> pd.DataFrame:
    """Runs with the variant's fields (cc, recovery, ...) as columns, as applied per run,
    and derived facts: path_kinds, rcvbuf_rule_bytes."""
    frame = results.runs.copy()
    spec_variants = {v["name"]: v for v in results.spec.get("variants", [])}
    direction = str((results.spec.get("traffic") or {}).get("direction", "download"))
    fields: dict[str, list[Any]] = {}
    for i, (run_id, name) in enumerate(zip(frame["run_id"], frame["variant"], strict=True)):
        bundle = results.bundles.get(str(run_id), {})
        variant = bundle.get("variant") or spec_variants.get(name, {})
        paths = bundle.get("paths") or list(results.spec.get("paths", []))
        facts = {**variant, **_derived(variant, paths, direction), **_path_facts(paths)}
        for key, value in facts.items():
            if key != "name" and not isinstance(value, dict | list):
                fields.setdefault(key, [None] * len(frame))[i] = value
    for key, values in fields.items():
        if key not in frame.columns:
            frame[key] = values
    return frame


def _columns_for(key: str, facts: pd.DataFrame) -> list[str]:
    if key in facts.columns and not key.startswith("param."):
        return [key]
    params = [c for c in facts.columns if c.startswith("param.")]
    exact = [c for c in params if c == f"param.{key}" or short_axis(c) == key]
    suffix = [c for c in params if c.endswith(f".{key}")]
    fixed = [c for c in facts.columns if c.startswith("path.") and c.endswith(f".{key}")]
    return exact or suffix or fixed


def _absent(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _matches(value: Any, cond: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(cond, Range):
        v = float(value)
        return (cond.min is None or v >= cond.min) and (cond.max is None or v <= cond.max)
    if isinstance(cond, list):
        return any(_matches(value, c) for c in cond)
    if isinstance(cond, bool) or isinstance(value, bool):
        return bool(value) == bool(cond)
    if isinstance(cond, int | float):
        try:
            return math.isclose(float(value), float(cond), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return str(value).lower() == str(cond).lower()


def match(facts: pd.DataFrame, conditions: dict[str, Any]) -> pd.DataFrame:
    """Rows whose facts meet every condition; raises KeyError naming an unknown key."""
    mask = [True] * len(facts)
    for key, cond in conditions.items():
        cols = _columns_for(key, facts)
        if not cols:
            raise KeyError(key)
        for col in cols:
            # a path fact absent on this run's path does not constrain it
            loose = col.startswith("path.")
            mask = [
                m and ((loose and _absent(v)) or _matches(v, cond))
                for m, v in zip(mask, facts[col], strict=True)
            ]
    return facts[mask]


def _describe(conditions: dict[str, Any]) -> str:
    def one(c: Any) -> str:
        if isinstance(c, Range):
            low = "" if c.min is None else f"{c.min:g}"
            high = "" if c.max is None else f"{c.max:g}"
            return f"[{low}..{high}]"
        return "|".join(map(str, c)) if isinstance(c, list) else str(c)

    return ", ".join(f"{k}={one(c)}" for k, c in conditions.items()) or "any run"


def _available_cc(results: Results) -> tuple[set[str] | None, str]:
    """Congestion controls every host offers (None if run.json does not record them)."""
    common: set[str] | None = None
    kernels = set()
    for bundle in results.bundles.values():
        for host in (bundle.get("hosts") or {}).values():
            kernels.add(str(host.get("kernel", "?")))
            text = (host.get("sysctls") or {}).get("net.ipv4.tcp_available_congestion_control")
            if text is not None:
                names = set(str(text).split())
                common = names if common is None else common & names
    return common, ", ".join(sorted(kernels))


def _aggregate(rows: pd.DataFrame, ref: Reference) -> tuple[float, int]:
    values = rows[ref.metric].dropna().astype(float) * ref.scale
    if values.empty:
        return math.nan, 0
    return float(getattr(values, ref.aggregate)()), int(values.size)


class NotComparable(Exception):
    """Why a reference cannot be checked against these results."""


def _side(facts: pd.DataFrame, conditions: dict[str, Any], ref: Reference) -> tuple[float, int]:
    try:
        rows = match(facts, conditions)
    except KeyError as e:
        raise NotComparable(
            f"condition {e.args[0]!r} is neither a sweep axis nor a variant or path field here"
        ) from e
    if rows.empty:
        raise NotComparable(f"no run matches conditions ({_describe(conditions)})")
    done = rows[rows["status"] == "complete"]
    if done.empty:
        reasons = sorted({str(r) for r in rows.get("reason", ["no reason recorded"])})
        raise NotComparable(f"all {len(rows)} matching runs failed: {'; '.join(reasons)}")
    value, n = _aggregate(done, ref)
    if n == 0:
        raise NotComparable(f"metric {ref.metric} has no values in the matching runs")
    return value, n


def _check_requires(results: Results, ref: Reference) -> str:
    """Raise when a required congestion control is missing; returns a hint when the hosts'
    facts do not say which ones are available."""
    if not ref.requires.congestion_control:
        return ""
    wanted = " or ".join(ref.requires.congestion_control)
    coupled = "coupled " if set(ref.requires.congestion_control) & COUPLED_CC else ""
    available, kernels = _available_cc(results)
    if available is None:
        return (
            f"; needs {coupled}congestion control ({wanted}), and run.json does not "
            "record net.ipv4.tcp_available_congestion_control"
        )
    if not available & set(ref.requires.congestion_control):
        raise NotComparable(
            f"{coupled}congestion control ({wanted}) not available on this kernel "
            f"({kernels}); available: {' '.join(sorted(available))}"
        )
    return ""


def _ours(results: Results, facts: pd.DataFrame, ref: Reference) -> tuple[float, int]:
    hint = _check_requires(results, ref)
    if ref.metric not in facts.columns:
        raise NotComparable(f"metric {ref.metric} missing: not collected for this campaign")
    try:
        value, n = _side(facts, ref.conditions, ref)
    except NotComparable as e:
        raise NotComparable(f"{e}{hint}") from e
    if ref.relative_to is None:
        return value, n
    base, nb = _side(facts, ref.relative_to, ref)
    if base == 0:
        raise NotComparable(f"{ref.metric} is 0 under {_describe(ref.relative_to)}")
    ratio = value / base
    return (ratio - 1) * 100 if ref.relation == "gain_pct" else ratio, n + nb


def verdict(ours: float, entry: Entry) -> Literal["within", "outside"]:
    """Within tolerance of the paper's value (or bound), or outside."""
    ref, slack = entry.ref, entry.tolerance.bound(entry.ref.value)
    if ref.kind == "at_most":
        return "within" if ours <= ref.value + slack else "outside"
    if ref.kind == "at_least":
        return "within" if ours >= ref.value - slack else "outside"
    return "within" if abs(ours - ref.value) <= slack + 1e-12 else "outside"


def check(results: Results, entries: dict[str, Entry], ids: list[str] | None = None) -> list[Check]:
    """Check the references the campaign names (or IDS) against its results."""
    if ids is None:
        ids = select(tuple(results.spec.get("references") or ()), entries)
    facts = _facts(results)
    if "reason" not in facts.columns:
        facts["reason"] = [
            results.bundles.get(str(r), {}).get("reason", "no reason recorded")
            for r in facts["run_id"]
        ]
    out = []
    for ref_id in ids:
        entry = entries.get(ref_id)
        if entry is None:
            what = "no reference id matches" if set("*?[") & set(ref_id) else "no such reference"
            reason = f"{what} in reports/references"
            out.append(Check(ref_id, None, None, 0, "not comparable", reason))
            continue
        try:
            ours, n = _ours(results, facts, entry.ref)
        except NotComparable as e:
            out.append(Check(ref_id, entry, None, 0, "not comparable", str(e)))
            continue
        out.append(Check(ref_id, entry, ours, n, verdict(ours, entry), entry.ref.note))
    return out


def load_for(results: Results, directory: Path | None = None) -> list[Check]:
    """Load the references and check the ones RESULTS' campaign names."""
    if not results.spec.get("references"):
        return []
    try:
        entries = load_all(directory or REFERENCES_DIR)
    except SpecError:
        raise
    except OSError as e:
        raise UsageError(f"{directory or REFERENCES_DIR}: cannot read references: {e}") from e
    return check(results, entries)
