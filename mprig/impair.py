"""Impairments: `tc netem` commands for each path's router, both directions.

The download direction (server -> client) is shaped on the egress of the router's
client-facing interface, the upload direction on the egress of its server-facing one.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Sequence

from mprig.rig.host import PathLink
from mprig.spec import Direction, Path

MTU_BITS = 1514 * 8  # one full-size Ethernet frame, the unit netem's limit counts


def _num(value: float) -> str:
    """A number as tc reads it: no trailing zeros, no exponent."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def netem_limit(d: Direction) -> int:
    """Packets netem must hold: the queue the spec asks for plus the delay line.

    netem counts packets waiting out their delay against `limit`; at high rate x delay
    the default limit would drop packets that are merely in flight, not queued.
    """
    in_flight = d.rate_mbit * 1e6 * (d.delay_ms + d.jitter_ms) / 1000 / MTU_BITS
    return d.limit_pkts + math.ceil(in_flight)


def netem_args(d: Direction) -> list[str]:
    """The netem parameters of one direction, as tc arguments."""
    args = ["delay", f"{_num(d.delay_ms)}ms"]
    if d.jitter_ms:
        args.append(f"{_num(d.jitter_ms)}ms")
    if d.loss_pct:
        args += ["loss", f"{_num(d.loss_pct)}%"]
    if d.reorder_pct:
        args += ["reorder", f"{_num(d.reorder_pct)}%"]
    args += ["rate", f"{_num(d.rate_mbit)}mbit", "limit", str(netem_limit(d))]
    return args


def apply_commands(path: Path, link: PathLink) -> list[tuple[str, list[str]]]:
    """(host, argv) that impair one path: download on router_client_if, upload on
    router_server_if."""
    return [
        (link.router, _replace(link.router_client_if, path.down)),
        (link.router, _replace(link.router_server_if, path.up)),
    ]


# bench/overhead only: where the kernel has no sch_netem, a tbf at the path's rate stands in
# so the runner's own overhead can still be measured natively (same commands, no delay).
STANDIN_ENV = "MPRIG_BENCH_TBF_FOR_NETEM"


def _replace(dev: str, d: Direction) -> list[str]:
    if os.environ.get(STANDIN_ENV) == "1":
        tbf = ["tbf", "rate", f"{_num(d.rate_mbit)}mbit", "burst", "32kb", "latency", "400ms"]
        return ["tc", "qdisc", "replace", "dev", dev, "root", *tbf]
    return ["tc", "qdisc", "replace", "dev", dev, "root", "netem", *netem_args(d)]


def clear_commands(link: PathLink) -> list[tuple[str, list[str]]]:
    """(host, argv) that remove the path's qdiscs (the router's default qdisc returns)."""
    return [
        (link.router, ["tc", "qdisc", "del", "dev", dev, "root"])
        for dev in (link.router_client_if, link.router_server_if)
    ]


def snapshot_argv() -> list[str]:
    """`tc -s qdisc show`: the before/after snapshot taken on every router."""
    return ["tc", "-s", "qdisc", "show"]


# One tc for many commands: under VM emulation every tc started costs 0.2-0.4 s. `-force`
# runs every line even after one failed (teardown removes what it can); the status is then
# 1. A constant script: the commands arrive as arguments, one line each.
TC_BATCH = 'printf "%s\\n" "$@" | tc -force -batch -'


def tc_batch(lines: Sequence[str]) -> list[str]:
    """argv running `lines` (tc commands without the leading `tc`) through one `tc -batch`."""
    return ["bash", "-c", TC_BATCH, "mprig-tc", *lines]


def fuse_tc(cmds: Sequence[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """(host, argv) in order, each run of one host's consecutive `tc` commands (two or more,
    without global options) joined into one tc_batch."""
    out: list[tuple[str, list[str]]] = []
    run: list[list[str]] = []
    for i, (host, argv) in enumerate(cmds):
        if _plain_tc(argv):
            run.append(argv)
        else:
            out.append((host, argv))
        nxt = cmds[i + 1] if i + 1 < len(cmds) else None
        if run and (nxt is None or nxt[0] != host or not _plain_tc(nxt[1])):
            joined = tc_batch([shlex.join(a[1:]) for a in run]) if len(run) > 1 else run[0]
            out.append((host, joined))
            run = []
    return out


def _plain_tc(argv: list[str]) -> bool:
    return len(argv) > 1 and argv[0] == "tc" and not argv[1].startswith("-")
