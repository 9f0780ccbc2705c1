"""Campaign spec, the error messages: pydantic's validation errors and the checks'
(location, message) issues become SpecErrors naming file:line, the field as written
(`paths.wifi.down.delay_ms`) and what is allowed (bounds with why, allowed keys, patterns).
"""

from __future__ import annotations

import re
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from mprig.campaign.spec_base import PATTERN_HELP, Loc, Source, SpecIssue, one_line, show
from mprig.errors import SpecError


def spec_error(e: ValidationError, root: type[BaseModel], source: Source) -> SpecError:
    """One SpecError for every error of a validation of `root` from `source`."""
    issues: list[tuple[Loc, str]] = []
    errs = e.errors(include_url=False)
    for err in errs:
        loc = _clean_loc(err["loc"])
        if err["type"] == "too_short" and _has_inner(errs, loc):
            continue  # pydantic counts a tuple's invalid items as missing: said below
        issue = (err.get("ctx") or {}).get("error")
        if isinstance(issue, SpecIssue):
            issues += [(loc + sub, message) for sub, message in issue.issues]
        else:
            issues.append((loc, _describe(err, loc, root)))
    return issues_error(source, issues)


def _has_inner(errs: list[Any], loc: Loc) -> bool:
    """Whether another error lies below `loc`."""
    return any(
        len(inner := _clean_loc(other["loc"])) > len(loc) and inner[: len(loc)] == loc
        for other in errs
    )


def issues_error(source: Source, issues: list[tuple[Loc, str]]) -> SpecError:
    """One SpecError listing every issue, by line, each as `file:line: field: message`."""
    located = dict.fromkeys((_as_written(loc, source.lines), message) for loc, message in issues)
    errors = [
        SpecError(
            source.filename,
            _line_for(loc, source.lines),
            _field_name(loc, source.data),
            one_line(message),
        )
        for loc, message in located
    ]
    errors.sort(key=lambda one: one.line or 0)
    return SpecError.many(errors)


def _as_written(loc: Loc, lines: dict[Loc, int]) -> Loc:
    """`paths.<i>.rate_mbit` for a direction's field that the file gives at path level (the
    shorthand for both directions): one message, not one per direction."""
    if len(loc) == 4 and loc[0] == "paths" and loc[2] in ("down", "up") and loc not in lines:
        shorthand = (loc[0], loc[1], loc[3])
        if shorthand in lines:
            return shorthand
    return loc


def describe_validation(e: ValidationError, root: type[BaseModel]) -> str:
    """One line for the first error of a ValidationError: `field: message`."""
    loc, message = located_message(e, root)
    return one_line(f"{'.'.join(map(str, loc))}: {message}" if loc else message)


def located_message(e: ValidationError, root: type[BaseModel]) -> tuple[Loc, str]:
    """The first error of a ValidationError: (its field's location, its message)."""
    err = e.errors(include_url=False)[0]
    loc = _clean_loc(err["loc"])
    issue = (err.get("ctx") or {}).get("error")
    if isinstance(issue, SpecIssue):
        return loc + issue.loc, issue.message
    return loc, _describe(err, loc, root)


def _clean_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Drop pydantic's union-member tags (`tuple[...]`, `Range`) from a location."""
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and p not in _TAGS))


_TAGS = ("Range", "float", "int", "str")


def _describe(err: Any, loc: tuple[str | int, ...], root: type[BaseModel]) -> str:
    kind, got = err["type"], show(err.get("input"))
    if kind == "extra_forbidden":
        return f"unknown key; allowed: {', '.join(_allowed_keys(loc[:-1], root))}"
    if kind == "missing":
        on_direction = loc[-1:] in (("down",), ("up",))
        hint = " (give rate_mbit at path level or under down:/up:)" if on_direction else ""
        return f"required key missing{hint}"
    if kind in ("too_short", "too_long"):
        bound = "at least" if kind == "too_short" else "at most"
        limit = err["ctx"]["min_length" if kind == "too_short" else "max_length"]
        return f"must have {bound} {limit} item{'s' if limit != 1 else ''}, got {got}"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        pattern = str(err["ctx"]["pattern"])
        return f"must be {PATTERN_HELP.get(pattern, 'match ' + pattern)}, got {got}"
    message = str(err["msg"]).replace("Input should be", "must be")
    bounds = _bounds(loc, root)
    return f"{message}, got {got}" + (f" (allowed: {bounds})" if bounds else "")


def _allowed_keys(loc: tuple[str | int, ...], root: type[BaseModel]) -> list[str]:
    model = _model_at(loc, root)
    if model is None:
        return []
    keys = list(model.model_fields)
    # a model's shorthand keys (Path: a direction's fields for both directions)
    return keys + list(getattr(model, "shorthand_fields", ()))


def _model_at(loc: tuple[str | int, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    model = root
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            continue  # a list index or a dict key: same model below
        inner = _inner_model(field.annotation)
        if inner is None:
            return None
        model = inner
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _field_info(loc: tuple[str | int, ...], root: type[BaseModel]) -> FieldInfo | None:
    names = [p for p in loc if isinstance(p, str)]
    if not names:
        return None
    model = _model_at(loc[: loc.index(names[-1])], root)
    return model.model_fields.get(names[-1]) if model else None


def _bounds(loc: tuple[str | int, ...], root: type[BaseModel]) -> str:
    """The allowed range of a numeric field, e.g. `>= 0 and <= 10000`."""
    info = _field_info(loc, root)
    if info is None:
        return ""
    ops = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    parts = [
        f"{ops[attr]} {getattr(m, attr):g}"
        for m in info.metadata
        for attr in ops
        if isinstance(getattr(m, attr, None), int | float)
    ]
    why = f": {info.description}" if parts and info.description else ""
    return " and ".join(parts) + why


def _line_for(loc: tuple[str | int, ...], lines: dict[tuple[str | int, ...], int]) -> int:
    """Line of the deepest part of loc that the file spells out (path shorthand included)."""
    shorthand = tuple(p for i, p in enumerate(loc) if not (i == 2 and p in ("down", "up")))
    for candidate in (loc, shorthand):
        if candidate in lines:
            return lines[candidate]
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return 1


def _field_name(loc: tuple[str | int, ...], data: Any) -> str:
    """`paths.wifi.down.delay_ms` (list items by name where they have one), `sweep.axes[k]`."""
    out = ""
    node = data
    for i, part in enumerate(loc):
        label = _item_label(node, part) if isinstance(part, int) else None
        if (isinstance(part, int) and label is None) or (i > 0 and loc[i - 1] == "axes"):
            out += f"[{part}]"
        else:
            out += f"{'.' if out else ''}{label or part}"
        node = _child(node, part)
    return out


def _item_label(node: Any, index: int) -> str | None:
    item = _child(node, index)
    name = item.get("name") if isinstance(item, dict) else None
    ok = isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,15}", name)
    return name if ok and isinstance(name, str) else None


def _child(node: Any, part: str | int) -> Any:
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    if isinstance(node, dict):
        return node.get(part)
    return None
