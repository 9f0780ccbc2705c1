"""Campaign spec, one name per thing (issue 20 part 3): the spelling a campaign uses for
each preset, and the other spellings still accepted with a deprecation message.

- TCP-DOOR is `tcpdoor` (the cc and the recovery preset; over Co-CC `tcpdoor_lia`, over
  FC-CC `tcpdoor_fccc`). `door`, `door_lia` and `door_fccc` are the names of its BPF
  programs (kernel-configs/bpf, the kernel's tcp_congestion_control values): an
  implementation name, shown in run.json's sysctls, not a spec value.
- PR-R (Alheid et al.'s reordering response, paper 000) is `prr`, over Co-CC `prr_lia`;
  the paper's spelling `PR-R` is accepted. It is not Linux's PRR (RFC 6937 proportional
  rate reduction), which every Linux sender runs in fast recovery whatever the cc.
- The Wi-Fi channel model calibrations are named by paper: `paper000`, `paper003`
  (mprig/campaign/wifi.py CALIBRATIONS); `seed000` and `seed003` are the old spellings, as
  "seed" is also the campaign's random seed.

An old spelling is replaced before validation (so the run ids, labels and reports know
one name), where the field is written and in the list values of a sweep axis on it, and
the campaign keeps a message per replacement, naming file:line and the spelling to write,
which `mprig validate` and `mprig run` print as warnings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mprig.campaign.spec_base import Loc
from mprig.errors import escape

_TCPDOOR = "TCP-DOOR's preset is tcpdoor; door is the name of its BPF program"
_PRR = "PR-R's preset is prr"
_PAPER = "channel models are named by paper: paperNNN"
# old spelling -> (the spelling to write, why)
_PRESETS: Mapping[str, tuple[str, str]] = {
    "door": ("tcpdoor", _TCPDOOR),
    "door_lia": ("tcpdoor_lia", _TCPDOOR + " over LIA"),
    "door_fccc": ("tcpdoor_fccc", _TCPDOOR + " over FC-CC"),
    "tcp_door": ("tcpdoor", _TCPDOOR),
    "tcp-door": ("tcpdoor", _TCPDOOR),
    "TCP-DOOR": ("tcpdoor", _TCPDOOR),
    "pr_r": ("prr", _PRR),
    "pr-r": ("prr", _PRR),
    "PR-R": ("prr", _PRR),
}
# (section, field) -> old spellings of that field's values
RENAMED: Mapping[tuple[str, str], Mapping[str, tuple[str, str]]] = {
    ("variants", "cc"): _PRESETS,
    ("variants", "recovery"): {
        k: v for k, v in _PRESETS.items() if not k.endswith(("_lia", "_fccc"))
    },
    ("paths", "channel_model"): {
        "seed000": ("paper000", _PAPER),
        "seed003": ("paper003", _PAPER),
    },
}


@dataclass(frozen=True)
class Respelled:
    """One old spelling replaced: where, what was written, what to write."""

    loc: Loc  # e.g. ("variants", 2, "cc"), or ("sweep", "axes", "variants.cc", 0)
    old: str
    new: str
    why: str


def respell(data: Any) -> tuple[Any, list[Respelled]]:
    """The campaign data with old spellings replaced, and each replacement; data that is
    not a campaign mapping is returned as it is (validation then says what is wrong)."""
    if not isinstance(data, dict):
        return data, []
    found: list[Respelled] = []
    out = dict(data)
    for (section, field), table in RENAMED.items():
        items = out.get(section)
        if not isinstance(items, list):
            continue
        out[section] = [
            _respell_item(item, (section, i, field), table, found) for i, item in enumerate(items)
        ]
    if "sweep" in out:
        out["sweep"] = _respell_sweep(out["sweep"], _names(out.get("variants")), found)
    return out, found


def _respell_item(
    item: Any, loc: Loc, table: Mapping[str, tuple[str, str]], found: list[Respelled]
) -> Any:
    field = loc[-1]
    value = item.get(field) if isinstance(item, dict) else None
    if not isinstance(value, str) or value not in table:
        return item
    new, why = table[value]
    found.append(Respelled(loc, value, new, why))
    return {**item, field: new}


def _respell_sweep(sweep: Any, variants: set[Any], found: list[Respelled]) -> Any:
    axes = sweep.get("axes") if isinstance(sweep, dict) else None
    if not isinstance(axes, dict):
        return sweep
    respelled = {
        key: _respell_axis(_axis_table(key, variants), key, values, found)
        for key, values in axes.items()
    }
    return {**sweep, "axes": respelled}


def _names(items: Any) -> set[str]:
    """The variants' names: `variants.<name>.<field>` is read before a sysctl axis. Only
    strings: this runs before validation, which reports a name of another type."""
    if not isinstance(items, list):
        return set()
    return {v["name"] for v in items if isinstance(v, dict) and isinstance(v.get("name"), str)}


def _respell_axis(
    table: Mapping[str, tuple[str, str]] | None, key: Any, values: Any, found: list[Respelled]
) -> Any:
    """An axis's list of values with old spellings replaced; a range (numbers) or an axis
    on a field without old spellings is returned as it is."""
    if table is None or not isinstance(values, list):
        return values
    out = []
    for i, value in enumerate(values):
        if isinstance(value, str) and value in table:
            new, why = table[value]
            found.append(Respelled(("sweep", "axes", key, i), value, new, why))
            value = new
        out.append(value)
    return out


def _axis_table(key: Any, variants: set[Any]) -> Mapping[str, tuple[str, str]] | None:
    """The old spellings of the field an axis sets: `variants.<field>`,
    `variants.<variant>.<field>` or `paths.<path>.<field>` (spec.py parse_axis); None for
    other axes. `variants.sysctls.<key>` sets a sysctl, whatever the key's last word,
    unless a variant is named sysctls (parse_axis reads a variant name first)."""
    parts = key.split(".") if isinstance(key, str) else []
    sysctl = parts[1:2] == ["sysctls"] and "sysctls" not in variants
    if len(parts) == 2 and parts[0] == "variants":
        return RENAMED.get(("variants", parts[1]))
    if len(parts) == 3 and parts[0] in ("variants", "paths") and not sysctl:
        return RENAMED.get((parts[0], parts[2]))
    return None


def messages(
    filename: str, lines: Mapping[Loc, int], data: Any, found: list[Respelled]
) -> tuple[str, ...]:
    """One `file:line: variants.<name>.cc: ...` line per replacement; a sweep value's line
    is its own (the axis's line when the list is written inline)."""
    return tuple(
        escape(
            f"{filename}:{lines.get(r.loc, lines.get(r.loc[:-1], 1))}: {_label(r.loc, data)}: "
            f"{r.old!r} is an old spelling, write {r.new!r} ({r.why}); accepted for now"
        )
        for r in found
    )


def _label(loc: Loc, data: Any) -> str:
    if loc[0] == "sweep":
        return f"sweep.axes[{loc[2]}]"  # as spec errors name an axis (spec_describe.py)
    section, index, field = loc
    items = data.get(section) if isinstance(data, dict) else None
    item = items[index] if isinstance(items, list) and isinstance(index, int) else None
    name = item.get("name") if isinstance(item, dict) else None
    return f"{section}.{name if isinstance(name, str) else f'[{index}]'}.{field}"
