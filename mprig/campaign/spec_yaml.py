"""Campaign spec, reading the YAML text: decoded, scanned for aliases, deep nesting and
over-long numbers, composed into nodes that keep their line marks, and constructed.

Every problem is a YamlProblem at a 1-based line; mprig/campaign/spec.py turns it into a SpecError.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from mprig.campaign.spec_base import MAX_DEPTH, MAX_DIGITS, MAX_FILE_BYTES


class YamlProblem(Exception):
    """A problem found while reading the YAML text, at a 1-based line."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


# libyaml when present: composing a 100 KiB file takes 0.2 s instead of 2 s.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_LONG_NUMBER = re.compile(r"[-+]?[0-9_.,:]*[0-9][0-9_.,:eE+-]*")


def _scan_events(text: str) -> None:
    """Refuse aliases (no alias bombs), deep nesting and numbers too long to convert (a
    5000-digit integer) before anything is composed."""
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        line = event.start_mark.line + 1 if event.start_mark else None
        if isinstance(event, yaml.AliasEvent):
            raise YamlProblem(line, "YAML aliases (*name) are not allowed; write the value out")
        if isinstance(event, yaml.ScalarEvent) and not event.style:
            _check_number_length(event.value, line)
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlProblem(line, f"nesting deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1


def _check_number_length(value: str, line: int | None) -> None:
    digits = sum(c.isdigit() for c in value)
    if digits > MAX_DIGITS and _LONG_NUMBER.fullmatch(value):
        msg = f"number with {digits} digits; numbers in a campaign have at most {MAX_DIGITS}"
        raise YamlProblem(line, msg)


def decode(text: str | bytes) -> str:
    """The text of a campaign file; YamlProblem for binary data or another encoding."""
    if isinstance(text, bytes):
        text = _decode_bytes(text)
    bad_char = re.search(
        r"[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]", text
    )
    if bad_char:
        line = text.count("\n", 0, bad_char.start()) + 1
        code = ord(bad_char.group())
        raise YamlProblem(line, f"control character U+{code:04X}: binary data, not YAML text")
    return text


def _decode_bytes(raw: bytes) -> str:
    if len(raw) > MAX_FILE_BYTES:
        raise YamlProblem(None, f"file larger than {MAX_FILE_BYTES} bytes; not a campaign")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        bad = raw[e.start]
        msg = f"not UTF-8 text (byte 0x{bad:02x}): binary data or another encoding"
        raise YamlProblem(line, f"{msg}; save campaigns as UTF-8 YAML") from None


def read_yaml(text: str) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """The constructed document and the line of every key and list item."""
    try:
        _scan_events(text)
        loader = _LOADER(text)
        try:
            node = _top_node(loader)
            return loader.construct_document(node), _line_map(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        raise YamlProblem(*_yaml_error(e, text)) from None
    except yaml.YAMLError as e:
        raise YamlProblem(None, f"YAML error: {e}") from None


def _top_node(loader: Any) -> yaml.MappingNode:
    node = loader.get_single_node()
    if node is None:
        raise YamlProblem(None, "empty file; a campaign needs at least name, paths, variants")
    if not isinstance(node, yaml.MappingNode):
        kind = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
        line = node.start_mark.line + 1
        raise YamlProblem(line, f"the top level must be a mapping (key: value), got {kind}")
    return node


def _yaml_error(e: yaml.MarkedYAMLError, text: str) -> tuple[int | None, str]:
    mark = e.problem_mark or e.context_mark
    line = mark.line + 1 if mark else None
    source = text.splitlines()[line - 1] if line and line <= len(text.splitlines()) else ""
    indent = source[: len(source) - len(source.lstrip(" \t"))]
    if "\t" in indent:
        return line, "tab character in indentation; indent with spaces"
    problem = e.problem or "invalid YAML"
    context = f"{e.context}, " if e.context else ""
    return line, f"YAML syntax error: {context}{problem}"


def _line_map(root: yaml.Node) -> dict[tuple[str | int, ...], int]:
    """Line of every key and list item, by location; raises on duplicate keys."""
    lines: dict[tuple[str | int, ...], int] = {(): root.start_mark.line + 1}
    todo: list[tuple[tuple[str | int, ...], yaml.Node]] = [((), root)]
    while todo:
        loc, node = todo.pop()
        for sub_loc, line, child in _children(loc, node):
            lines[sub_loc] = line
            todo.append((sub_loc, child))
    return lines


def _children(
    loc: tuple[str | int, ...], node: yaml.Node
) -> Iterator[tuple[tuple[str | int, ...], int, yaml.Node]]:
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield (*loc, i), item.start_mark.line + 1, item
    elif isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else f"<key@{line}>"
            if name in seen:
                raise YamlProblem(line, f"duplicate key {name!r} (first at line {seen[name]})")
            seen[name] = line
            yield (*loc, name), line, value


# ---------------------------------------------------------------- validation messages
