"""Parse `nstat -asz --json` (kernel SNMP/MIB counters) and take before/after deltas.

The runner records `nstat -asz --json` (`{"kernel": {"<Name>": value, ...}}`, zeros
included) on each host before and after a run; the run's counters are the differences.
Bundles recorded before mprig asked for JSON hold nstat's text instead (`#kernel`, then one
`<Name> <value> <rate>` line per counter), which is still read. MPTcpExt* are MPTCP's MIB
(net/mptcp/mib.c), TcpExt* TCP's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from collectors.textparse import ParseError

PREFIXES = ("MPTcpExt", "TcpExt")  # the counter families a run's metrics keep


def parse_nstat(text: str) -> dict[str, int]:
    """Counter name -> value, in file order: `nstat --json` output, or nstat's text in
    bundles recorded before mprig asked for JSON."""
    return parse_json(text) if text.lstrip().startswith("{") else parse_text(text)


def parse_json(text: str) -> dict[str, int]:
    """Counter name -> value from `nstat --json` output."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(e.lineno, f"not JSON ({e.msg}): expected `nstat --json` output") from None
    counters = doc.get("kernel") if isinstance(doc, dict) else None
    if not isinstance(counters, dict) or not counters:
        raise ParseError(None, 'no counters (expected `nstat --json` output: {"kernel": {...}})')
    for name, value in counters.items():
        if type(value) is not int or value < 0:
            raise ParseError(None, f"counter {name}: {value!r} is not a count")
    return dict(counters)


def parse_text(text: str) -> dict[str, int]:
    """Counter name -> value from nstat's text output (`nstat -az`)."""
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) not in (2, 3) or not parts[1].isdigit():
            raise ParseError(lineno, f"not an nstat counter line (name value rate): {line!r}")
        out[parts[0]] = int(parts[1])
    if not out:
        raise ParseError(None, "no counters (expected `nstat -az` output)")
    return out


def delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """after - before for every counter in `after` (a counter new in `after` counts from 0).

    A counter that went down means the two snapshots are swapped or come from different
    boots or namespaces: that is an error, not a negative count.
    """
    out = {name: value - before.get(name, 0) for name, value in after.items()}
    down = [name for name, d in out.items() if d < 0]
    if down:
        raise ParseError(
            None,
            f"counter {down[0]} went down from {before[down[0]]} to {after[down[0]]}: "
            "snapshots swapped, or taken on different hosts or boots",
        )
    return out


def select(counters: Mapping[str, int], prefixes: tuple[str, ...] = PREFIXES) -> dict[str, int]:
    """Only the counters whose names start with one of `prefixes`."""
    return {k: v for k, v in counters.items() if k.startswith(prefixes)}


def run_deltas(before_text: str, after_text: str) -> dict[str, int]:
    """MPTcpExt* and TcpExt* deltas of a run from its two nstat snapshots."""
    return select(delta(parse_nstat(before_text), parse_nstat(after_text)))


# How a run's sender repaired its losses, from its nstat deltas: runs.parquet columns and
# the counters each sums. nstat counts every TCP socket of the host's network namespace:
# the data subflows and iperf3's idle control connection (on a lab host, SSH too).
SENDER_COUNTERS = {
    "sender_timeouts": ("TcpExtTCPTimeouts",),
    "sender_fast_recoveries": ("TcpExtTCPSackRecovery", "TcpExtTCPRenoRecovery"),
}


def sender_counters(deltas: Mapping[str, int] | None) -> dict[str, int | None]:
    """SENDER_COUNTERS from the sender's deltas; None each without them."""
    return {
        column: None if deltas is None else sum(int(deltas.get(c, 0)) for c in counters)
        for column, counters in SENDER_COUNTERS.items()
    }
