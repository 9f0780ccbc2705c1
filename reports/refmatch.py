"""What each run was run under (variant, sweep point, configured paths), as a table a
reference's conditions are matched against; derived quantities (the buffer rule,
capacity, delay difference) are computed from the configured paths."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from reports.refspec import Range
from reports.refstats import NAN
from reports.results import Results, short_axis

if TYPE_CHECKING:
    import pandas as pd


def _variant_paths(variant: dict[str, Any], paths: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if variant.get("protocol") == "tcp" and variant.get("path"):
        names = {variant["path"]}
    else:
        names = set(variant.get("paths") or [p["name"] for p in paths])
    return [p for p in paths if p.get("name") in names]


def rcvbuf_rule_bytes(paths: list[dict[str, Any]], direction: str = "download") -> float:
    """Paper 004's receive buffer rule: 2 x sum of path rates x the largest round trip."""
    key = "down" if direction == "download" else "up"
    rate_bps = sum(float(p[key]["rate_mbit"]) * 1e6 for p in paths)
    rtt_s = max(
        (float(p["down"].get("delay_ms", 0)) + float(p["up"].get("delay_ms", 0))) / 1000
        for p in paths
    )
    return 2 * rate_bps / 8 * rtt_s


def capacity_bps(paths: list[dict[str, Any]], direction: str = "download") -> float:
    """The configured rate of PATHS (bits/s): netem's rate, after the Wi-Fi model maps a
    distance to it (mprig/campaign/wifi.py), summed over the paths."""
    from mprig.campaign import wifi
    from mprig.campaign.spec import Path as PathSpec

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
    from mprig.campaign import presets

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


def run_facts(results: Results) -> pd.DataFrame:
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


def describe(conditions: dict[str, Any]) -> str:
    def one(c: Any) -> str:
        if isinstance(c, Range):
            low = "" if c.min is None else f"{c.min:g}"
            high = "" if c.max is None else f"{c.max:g}"
            return f"[{low}..{high}]"
        return "|".join(map(str, c)) if isinstance(c, list) else str(c)

    return ", ".join(f"{k}={one(c)}" for k, c in conditions.items()) or "any run"


def available_cc(results: Results) -> tuple[set[str] | None, str]:
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
