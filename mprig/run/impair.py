"""Impairments: `tc netem` commands for each path's router, both directions.

The download direction (server -> client) is shaped on the egress of the router's
client-facing interface, the upload direction on the egress of its server-facing one.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Sequence

from mprig.campaign import netemspec
from mprig.campaign.spec import Direction, Path
from mprig.rig.batch import Cmd
from mprig.rig.host import PathLink
from mprig.run import aqm

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
    """The netem parameters of one direction, as tc arguments (with `aqm`, the rate is the
    shaper's below netem: mprig/run/aqm.py)."""
    args = ["delay", f"{_num(d.delay_ms)}ms"]
    if d.jitter_ms:
        args.append(f"{_num(d.jitter_ms)}ms")
    if d.jitter_ms and d.jitter_dist not in (None, "uniform"):
        args += ["distribution", str(d.jitter_dist)]
    if d.loss_pct:
        args += ["loss", f"{_num(d.loss_pct)}%"]
    if netemspec.ge_on(d):
        probs = (d.ge_p_pct, d.ge_r_pct, d.ge_bad_loss_pct, d.ge_good_loss_pct)
        args += ["loss", "gemodel", *(f"{_num(p)}%" for p in probs)]
    if d.reorder_pct:
        args += ["reorder", f"{_num(d.reorder_pct)}%"]
    if d.aqm is None:
        args += ["rate", f"{_num(d.rate_mbit)}mbit"]
    return [*args, "limit", str(netem_limit(d))]


def apply_commands(path: Path, link: PathLink) -> list[tuple[str, list[str]]]:
    """(host, argv) that impair one path: download on router_client_if, upload on
    router_server_if."""
    return [
        *[(link.router, argv) for argv in _replace(link.router_client_if, path.down)],
        *[(link.router, argv) for argv in _replace(link.router_server_if, path.up)],
    ]


# bench/overhead only: where the kernel has no sch_netem, a tbf at the path's rate stands in
# so the runner's own overhead can still be measured natively (same commands, no delay).
STANDIN_ENV = "MPRIG_BENCH_TBF_FOR_NETEM"


def _replace(dev: str, d: Direction) -> list[list[str]]:
    rate = f"{_num(d.rate_mbit)}mbit"
    if os.environ.get(STANDIN_ENV) == "1":  # no AQM either: such a kernel has none
        tbf = ["tbf", "rate", rate, "burst", "32kb", "latency", "400ms"]
        return [["tc", "qdisc", "replace", "dev", dev, "root", *tbf]]
    if d.aqm is not None:
        return aqm.tree_argvs(dev, d.aqm, (d.rate_mbit, rate), d.limit_pkts, netem_args(d))
    return [["tc", "qdisc", "replace", "dev", dev, "root", "netem", *netem_args(d)]]


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
# 1. A constant script: $1 the global options ("-s" or nothing), then one command a line.
TC_BATCH = 'o=$1; shift; printf "%s\\n" "$@" | tc $o -force -batch -'


def tc_batch(lines: Sequence[str], *, stats: bool = False) -> list[str]:
    """argv running `lines` (tc commands without the leading `tc`) through one `tc -batch`
    (`stats`: with -s, for a `qdisc show` among them)."""
    return ["bash", "-c", TC_BATCH, "mprig-tc", "-s" if stats else "", *lines]


def fuse_tc(cmds: Sequence[Cmd]) -> list[Cmd]:
    """One host's commands in order, each run of two or more consecutive foreground `tc`
    commands (no global option but -s; at most one that prints: `qdisc show`) joined into
    one tc_batch. The fused command keeps its parts, so a part's output is found by its
    own argv; it checks its status only if every part did."""
    out: list[Cmd] = []
    run: list[Cmd] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            lines = [shlex.join(c.argv[2:] if c.argv[1] == "-s" else c.argv[1:]) for c in run]
            stats = any(c.argv[1] == "-s" for c in run)
            out.append(
                Cmd(
                    tc_batch(lines, stats=stats),
                    timeout=sum(c.timeout for c in run),
                    check=all(c.check for c in run),
                    parts=tuple(tuple(c.argv) for c in run),
                )
            )
        run.clear()

    for c in cmds:
        if not _fusable(c) or (_prints(c) and any(_prints(r) for r in run)):
            flush()
        if _fusable(c):
            run.append(c)
        else:
            out.append(c)
    flush()
    return out


def _fusable(c: Cmd) -> bool:
    a = c.argv
    plain = len(a) > 1 and a[0] == "tc" and (a[1] == "-s" or not a[1].startswith("-"))
    return plain and c.log is None and not c.enforce_timeout and not c.parts


def _prints(c: Cmd) -> bool:
    return "show" in c.argv
