"""Published numbers (reports/references/*.yaml) and their comparison with a campaign's.

A reference names the paper, the table or figure, the conditions under which the paper
measured it (matched against each run's variant and sweep point), our metric and how to
scale it into the paper's unit, the value and a tolerance with the reason for its width.
`check()` turns a reference and a campaign's results into a verdict that can fail:

- ours is a sample of one value per repetition (the matching runs of a repetition
  aggregated), given as its mean with a 95 % t interval; n counts repetitions;
- the window is the paper's value +- the tolerance; a bound ("never above") is two-sided:
  a sanity floor (a number, or a fraction of the runs' configured capacity) below it;
- "reproduced" when the interval lies inside the window, "contradicted" when wholly
  outside, otherwise "inconclusive" with the n that would decide it (from the observed SD);
- "uninformative" when the window includes the no-effect value (0 %, a ratio of 1) and
  the interval lies inside it or straddles its edge: such a window can never make a row
  reproduced, since a result inside it cannot tell the paper's effect from none; an
  interval wholly outside it is "contradicted" all the same;
- "configuration check" when the metric is a configured quantity (seed 004's buffer
  rule computed from the paths), which cannot fail by measurement: counted apart;
- "not comparable" with the reason when no run, metric or kernel feature allows it.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mprig.errors import SpecError, UsageError
from reports.results import Results, short_axis
from reports.tables import sig

if TYPE_CHECKING:
    import pandas as pd

REFERENCES_DIR = Path(__file__).parent / "references"
RefId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{2,95}$")]
Scalar = float | int | str | bool
COUPLED_CC = frozenset(
    {"lia", "olia", "balia", "wvegas", "fully_coupled", "fccc", "prr_lia", "door_lia", "door_fccc"}
)  # multipath-aware


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


# --- checking ----------------------------------------------------------------------------


Verdict = Literal[
    "reproduced",
    "contradicted",
    "inconclusive",
    "not comparable",
    "configuration check",
    "uninformative",
]
VERDICTS: tuple[Verdict, ...] = (
    "reproduced",
    "contradicted",
    "inconclusive",
    "uninformative",
    "configuration check",
    "not comparable",
)
NAN = math.nan


@dataclass(frozen=True)
class Check:
    """Ours next to the paper's: a mean over repetitions with its interval and window."""

    id: str
    entry: Entry | None  # None: the campaign named an unknown id
    ours: float | None  # mean over repetitions, in the paper's unit (a ratio of means)
    n: int  # repetitions that went into ours (the `conditions` side)
    verdict: Verdict
    reason: str = ""
    low: float = NAN  # 95 % confidence interval of ours; NaN when n < 2
    high: float = NAN
    window: tuple[float, float] | None = None  # what the paper's value allows
    n_needed: int | None = None  # inconclusive: repetitions that would decide it
    n_base: int = 0  # repetitions of the `relative_to` side

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


def capacity_bps(paths: list[dict[str, Any]], direction: str = "download") -> float:
    """The configured rate of PATHS (bits/s): netem's rate, after the Wi-Fi model maps a
    distance to it (mprig/wifi.py), summed over the paths."""
    from mprig import wifi
    from mprig.spec import Path as PathSpec

    key = "down" if direction == "download" else "up"
    total = 0.0
    for p in paths:
        try:
            total += getattr(wifi.effective_path(PathSpec.model_validate(p)), key).rate_mbit * 1e6
        except (ValidationError, ValueError):
            total += float((p.get(key) or {}).get("rate_mbit", NAN)) * 1e6
    return total


def _delay_difference_ms(paths: list[dict[str, Any]]) -> float:
    """Largest minus smallest one-way (down) delay over the rig's paths: Table I's axis."""
    delays = [float((p.get("down") or {}).get("delay_ms", 0)) for p in paths]
    return max(delays) - min(delays) if delays else NAN


def _derived(
    variant: dict[str, Any], paths: list[dict[str, Any]], direction: str
) -> dict[str, Any]:
    from mprig import presets

    used = _variant_paths(variant, paths)
    if not used:
        return {}
    return {
        "path_kinds": "+".join(sorted(str(p.get("kind")) for p in used)),
        "rcvbuf_rule_bytes": rcvbuf_rule_bytes(used, direction),
        "capacity_bps": capacity_bps(used, direction),
        "delay_diff_ms": _delay_difference_ms(paths),
        "coupling": presets.coupling(str(variant.get("cc", "cubic"))),
    }


# Facts computed from a run's configuration, not measured: a reference on one of them is a
# configuration check (the rule applied to the configured paths), never a reproduction.
CONFIGURED = frozenset({"rcvbuf_rule_bytes", "capacity_bps", "delay_diff_ms"})


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


class NotComparable(Exception):
    """Why a reference cannot be checked against these results."""


@dataclass(frozen=True)
class Sample:
    """One side of a reference: a value per repetition, and the runs behind them."""

    values: np.ndarray  # per repetition: the matching runs' metric, aggregated, x scale
    runs: pd.DataFrame  # the completed matching runs


def _side(facts: pd.DataFrame, conditions: dict[str, Any], ref: Reference) -> Sample:
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
    values = done[ref.metric].astype(float) * ref.scale
    per_rep = values.groupby(done["repetition"]).agg(ref.aggregate).dropna()
    if per_rep.empty:
        raise NotComparable(f"metric {ref.metric} has no values in the matching runs")
    return Sample(per_rep.to_numpy(dtype=float), done)


@dataclass(frozen=True)
class Estimate:
    """Ours: a mean (or a ratio of means) with its 95 % interval and effective SD."""

    mean: float
    low: float  # NaN when a side has n < 2
    high: float
    n: int  # repetitions of the conditions side
    n_base: int  # repetitions of the relative_to side (0: none)
    sd: float  # per-repetition SD such that the half-width is t x sd / sqrt(n_eff)

    @property
    def n_eff(self) -> int:
        return min(self.n, self.n_base) if self.n_base else self.n


def estimate(a: np.ndarray, b: np.ndarray | None = None, relation: str = "ratio") -> Estimate:
    """Mean of A with a t interval; with B, the ratio of means (or the gain in %) with a
    delta-method interval on min(n_a, n_b) - 1 degrees of freedom."""
    from reports.stats import mean_ci

    ci = mean_ci(a)
    sd_a = float(np.std(a, ddof=1)) if a.size > 1 else NAN
    if b is None:
        return Estimate(ci.mean, ci.low, ci.high, int(a.size), 0, sd_a)
    mb = float(np.mean(b))
    if mb == 0:
        raise NotComparable("the relative_to side's mean is 0")
    ratio = ci.mean / mb
    n = min(a.size, b.size)
    sd_b = float(np.std(b, ddof=1)) if b.size > 1 else NAN
    se = abs(ratio) * math.sqrt(sd_a**2 / (a.size * ci.mean**2 or NAN) + sd_b**2 / (b.size * mb**2))
    half = _t(n) * se if n > 1 else NAN
    est = Estimate(ratio, ratio - half, ratio + half, int(a.size), int(b.size), se * math.sqrt(n))
    if relation != "gain_pct":
        return est
    return Estimate(
        (ratio - 1) * 100,
        (est.low - 1) * 100,
        (est.high - 1) * 100,
        est.n,
        est.n_base,
        est.sd * 100,
    )


def _t(n: int) -> float:
    from scipy import stats as sps

    return float(sps.t.ppf(0.975, n - 1))


def n_needed(mean: float, window: tuple[float, float], sd: float) -> int | None:
    """The smallest n whose 95 % interval (t x SD / sqrt n) would lie wholly inside or
    wholly outside WINDOW around MEAN; None when no n can (mean on an edge, SD unknown)."""
    lo, hi = window
    if lo <= mean <= hi:
        distance = min(mean - lo, hi - mean)
    else:
        distance = lo - mean if mean < lo else mean - hi
    if not distance > 0 or not sd > 0:
        return None
    for n in range(2, 100_001):
        if _t(n) * sd / math.sqrt(n) < distance:
            return n
    return None


def decide(
    mean: float, low: float, high: float, n: int, window: tuple[float, float], sd: float
) -> tuple[Verdict, int | None]:
    """Reproduced when the interval lies inside the window, contradicted when wholly
    outside, otherwise inconclusive with the n that would decide it."""
    lo, hi = window
    if n < 2 or math.isnan(low) or math.isnan(high) or math.isnan(lo) or math.isnan(hi):
        return "inconclusive", None
    if low >= lo and high <= hi:
        return "reproduced", None
    if high < lo or low > hi:
        return "contradicted", None
    return "inconclusive", n_needed(mean, window, sd)


def _window(entry: Entry, sd: float, capacity: float) -> tuple[float, float]:
    ref = entry.ref
    slack = entry.tolerance.bound(ref.value, sd)
    if ref.kind == "at_most":
        floor = ref.floor if ref.floor is not None else (ref.floor_capacity or 0) * capacity
        return floor, ref.value + slack
    if ref.kind == "at_least":
        return ref.value - slack, ref.ceiling if ref.ceiling is not None else math.inf
    return ref.value - slack, ref.value + slack


def window_includes_no_effect(entry: Entry, sd: float = NAN, capacity: float = NAN) -> bool:
    """Whether the window allows the no-effect value (unknown windows do not)."""
    lo, hi = _window(entry, sd, capacity)
    return bool(lo <= entry.ref.null_value <= hi)


def _collapsed(sample: Sample, ref: Reference) -> int:
    """Runs under the sanity floor: floor_capacity x their own configured capacity."""
    if ref.floor_capacity is None or "capacity_bps" not in sample.runs.columns:
        return 0
    runs = sample.runs
    floor = ref.floor_capacity * runs["capacity_bps"].astype(float) * ref.scale
    return int((runs[ref.metric].astype(float) * ref.scale < floor).sum())


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


def _samples(results: Results, facts: pd.DataFrame, ref: Reference) -> tuple[Sample, Sample | None]:
    hint = _check_requires(results, ref)
    if ref.metric not in facts.columns:
        raise NotComparable(f"metric {ref.metric} missing: not collected for this campaign")
    try:
        a = _side(facts, ref.conditions, ref)
    except NotComparable as e:
        raise NotComparable(f"{e}{hint}") from e
    if ref.relative_to is None:
        return a, None
    return a, _side(facts, ref.relative_to, ref)


def _fmt(x: float) -> str:
    return sig(x)


def shown_window(ref: Reference, window: tuple[float, float]) -> tuple[float, float]:
    """WINDOW as a report shows it: from 0 when the quantity cannot be negative (OOO-BO's
    [-1 590, 1 810] KB is [0, 1 810] KB). A window that reaches below 0 holds the no-effect
    value 0 either way, so it is uninformative unless our interval lies wholly outside it."""
    lo, hi = window
    return (max(lo, 0.0), hi) if ref.nonnegative and lo < 0 else (lo, hi)


def _configuration(entry: Entry, est: Estimate) -> Check:
    ref = entry.ref
    lo, hi = _window(entry, NAN, NAN)
    holds = "holds" if lo <= est.mean <= hi else "does not hold"
    reason = (
        f"{holds}: configured {est.mean:g} {ref.unit} (paper {ref.value:g} {ref.unit}, "
        f"{entry.tolerance}); computed from the configured paths, not measured"
    )
    return Check(ref.id, entry, est.mean, est.n, "configuration check", reason,
                 window=(lo, hi))  # fmt: skip


def judge(entry: Entry, a: Sample, b: Sample | None) -> Check:
    """The verdict of one reference on its samples (pure)."""
    ref = entry.ref
    est = estimate(a.values, None if b is None else b.values, ref.relation)
    if ref.metric in CONFIGURED:
        return _configuration(entry, est)
    capacity = float(a.runs["capacity_bps"].mean()) if "capacity_bps" in a.runs else NAN
    window = _window(entry, est.sd, capacity)
    base = Check(ref.id, entry, est.mean, est.n, "inconclusive", "", est.low, est.high, window,
                 None, est.n_base)  # fmt: skip
    verdict, n_more = decide(est.mean, est.low, est.high, est.n_eff, window, est.sd)
    if verdict != "contradicted" and window[0] <= ref.null_value <= window[1]:
        return replace(base, verdict="uninformative", reason=_uninformative(ref, est, window))
    reason = _reason(verdict, est, shown_window(ref, window), n_more)
    collapsed = _collapsed(a, ref)
    if collapsed:
        reason = (
            f"{collapsed} of {len(a.runs)} runs under the sanity floor "
            f"({ref.floor_capacity:g} x configured capacity): collapsed; {reason}"
        )
        if verdict == "reproduced":
            verdict, reason = "inconclusive", reason + "; a collapsed run cannot reproduce"
    reason = "; ".join(x for x in (reason, ref.note) if x)
    return replace(base, verdict=verdict, reason=reason, n_needed=n_more)


def _uninformative(ref: Reference, est: Estimate, window: tuple[float, float]) -> str:
    """Why a window holding the no-effect value decides nothing unless the CI lies wholly
    outside it (then judge() calls the row contradicted)."""
    low, high = shown_window(ref, window)
    reason = (
        f"the window [{_fmt(low)}, {_fmt(high)}] {ref.unit} includes the no-effect value "
        f"{ref.null_value:g}: a result inside it cannot tell the paper's effect from none"
    )
    if est.n_eff < 2 or math.isnan(est.low) or math.isnan(est.high):
        return reason
    ci = f"95 % CI [{_fmt(est.low)}, {_fmt(est.high)}]"
    if est.low >= window[0] and est.high <= window[1]:
        return f"{reason}; {ci} inside it"
    return f"{reason}; {ci} straddles it, only one wholly outside decides (contradicted)"


def _reason(verdict: str, est: Estimate, window: tuple[float, float], n_more: int | None) -> str:
    ci = f"95 % CI [{_fmt(est.low)}, {_fmt(est.high)}]"
    win = f"window [{_fmt(window[0])}, {_fmt(window[1])}]"
    if est.n_eff < 2:
        return f"n = {est.n_eff}: no interval; at least 2 repetitions needed (full profile: 5+)"
    if math.isnan(window[0]) or math.isnan(window[1]):
        return f"{ci}; the window needs our run-to-run SD"
    if verdict == "reproduced":
        return f"{ci} inside the {win}"
    if verdict == "contradicted":
        return f"{ci} wholly outside the {win}"
    more = f"about n = {n_more} would decide it" if n_more else "no n decides it"
    return f"{ci} straddles the {win}; {more} (observed SD {_fmt(est.sd)})"


def _facts_with_reasons(results: Results) -> pd.DataFrame:
    facts = _facts(results)
    if "reason" not in facts.columns:
        facts["reason"] = [
            results.bundles.get(str(r), {}).get("reason", "no reason recorded")
            for r in facts["run_id"]
        ]
    return facts


def check(results: Results, entries: dict[str, Entry], ids: list[str] | None = None) -> list[Check]:
    """Check the references the campaign names (or IDS) against its results."""
    if ids is None:
        ids = select(tuple(results.spec.get("references") or ()), entries)
    facts = _facts_with_reasons(results)
    out = []
    for ref_id in ids:
        entry = entries.get(ref_id)
        if entry is None:
            what = "no reference id matches" if set("*?[") & set(ref_id) else "no such reference"
            reason = f"{what} in reports/references"
            out.append(Check(ref_id, None, None, 0, "not comparable", reason))
            continue
        try:
            out.append(judge(entry, *_samples(results, facts, entry.ref)))
        except NotComparable as e:
            out.append(Check(ref_id, entry, None, 0, "not comparable", str(e)))
    return out


def matched_variants(results: Results, entry: Entry) -> tuple[set[str], ...]:
    """The variants whose runs each side of ENTRY's conditions meets (any status)."""
    facts = _facts(results)
    sides = [entry.ref.conditions, *([entry.ref.relative_to] if entry.ref.relative_to else [])]
    out = []
    for conditions in sides:
        try:
            out.append(set(map(str, match(facts, conditions)["variant"])))
        except KeyError:
            out.append(set())
    return tuple(out)


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
