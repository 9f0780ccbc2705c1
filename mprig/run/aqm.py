"""The queue discipline of a path direction (`aqm`), put where the queue builds.

Without `aqm`, netem shapes the rate itself (`netem ... rate R limit L`) and its own queue
(a time-ordered FIFO) is the bottleneck queue: no AQM can sit there. With `aqm`, netem only
delays and drops, and the rate moves to a shaper below it, so the queue builds in the
shaper's leaf, which is the AQM:

    netem (handle 1:, root)       delay, jitter, loss: the delay line
     └─ tbf (2:, parent 1:1)      rate R: packets wait for tokens here ...
         └─ pfifo | fq_codel (3:) ... in this queue of limit_pkts packets
    netem (1:, root)
     └─ cake (2:, parent 1:1)     cake shapes itself (bandwidth R) and queues

netem counts the packets its child holds against its own `limit` (sch->q.qlen includes
them), so its limit stays impair.netem_limit: the AQM's limit_pkts plus the delay line.
The tree read back after set-up (`tc qdisc show`) must match `expected_tree`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mprig.campaign.netemspec import Aqm

MTU_BYTES = 1514  # one full-size Ethernet frame: tbf's burst and cake's memory are sized by it
BURST_S = 0.001  # tbf bucket: 1 ms at the rate, at least 4 frames (a timer tick's worth)
TreeEntry = tuple[str, str, str]  # (kind, handle, parent) as `tc qdisc show` prints them


def burst_bytes(rate_mbit: float) -> int:
    """tbf's bucket: BURST_S at the rate, at least four full frames."""
    return max(4 * MTU_BYTES, int(rate_mbit * 1e6 / 8 * BURST_S))


def tree_argvs(
    dev: str, aqm: Aqm, rate: tuple[float, str], limit_pkts: int, netem: list[str]
) -> list[list[str]]:
    """The tc commands building the tree on `dev`: `netem` (netem's arguments, without
    rate), then the shaper at `rate` (Mbit/s, and as tc reads it: "10mbit") and the AQM."""
    q = ["tc", "qdisc", "replace", "dev", dev]
    # `handle` before `root`: the word after `root` names the qdisc (isolation.expected)
    out = [[*q, "handle", "1:", "root", "netem", *netem]]
    memory = str(limit_pkts * MTU_BYTES)
    if aqm == "cake":
        cake = ["cake", "bandwidth", rate[1], "memlimit", memory]
        return [*out, [*q, "parent", "1:1", "handle", "2:", *cake]]
    tbf = ["tbf", "rate", rate[1], "burst", str(burst_bytes(rate[0])), "limit", memory]
    leaf = [aqm, "limit", str(limit_pkts)]
    out.append([*q, "parent", "1:1", "handle", "2:", *tbf])
    return [*out, [*q, "parent", "2:1", "handle", "3:", *leaf]]


def expected_tree(argvs: Sequence[Sequence[str]]) -> dict[str, set[TreeEntry]]:
    """Per device, the (kind, handle, parent) of every qdisc a tree's commands create; only
    devices given a `handle` (an AQM tree) are listed."""
    out: dict[str, set[TreeEntry]] = {}
    for argv in argvs:
        if list(argv[:3]) == ["tc", "qdisc", "replace"] and "handle" in argv:
            words = _selectors(argv[3:])
            entry = (words["kind"], words["handle"], words.get("parent", "root"))
            out.setdefault(words["dev"], set()).add(entry)
    return out


def _selectors(words: Sequence[str]) -> dict[str, str]:
    """tc's qdisc selectors (dev, handle, parent; root) up to the qdisc's kind."""
    out: dict[str, str] = {}
    i = 0
    while words[i] in ("dev", "handle", "parent", "root"):
        if words[i] == "root":
            i += 1
            continue
        out[words[i]] = words[i + 1]
        i += 2
    return {**out, "kind": words[i]}


_LINE = re.compile(r"^qdisc (\S+) (\S+) dev (\S+) (root|parent (\S+))")


def parse_tree(snapshot: str) -> dict[str, set[TreeEntry]]:
    """`tc qdisc show` text -> per device, its qdiscs as (kind, handle, parent)."""
    out: dict[str, set[TreeEntry]] = {}
    for line in snapshot.splitlines():
        m = _LINE.match(line)
        if m:
            parent = "root" if m[4] == "root" else m[5]
            out.setdefault(m[3], set()).add((m[1], m[2], parent))
    return out


def tree_problems(want: dict[str, set[TreeEntry]], snapshot: str) -> list[str]:
    """What differs between the trees set-up asked for and the qdiscs read back."""
    got = parse_tree(snapshot)
    return [
        f"{dev}: qdiscs {_show(got.get(dev, set()))}, spec {_show(tree)}"
        for dev, tree in sorted(want.items())
        if got.get(dev, set()) != tree
    ]


def _show(tree: set[TreeEntry]) -> str:
    return ", ".join(f"{k} {h} ({p})" for k, h, p in sorted(tree, key=lambda e: e[1])) or "none"


def record_trees(
    setup: Sequence[tuple[str, Sequence[str]]],
    snapshots: Mapping[str, str],
    settings: dict[str, dict[str, Any]],
) -> list[str]:
    """Record in `settings` (run.json) each router's AQM trees as read back from its
    `tc qdisc show` snapshot (settings.<router>.qdisc_tree: device -> qdiscs); return
    what differs from the trees set-up asked for ("router: dev: ...")."""
    problems: list[str] = []
    for host, snapshot in snapshots.items():
        want = expected_tree([argv for h, argv in setup if h == host])
        if not want:
            continue
        got = parse_tree(snapshot)
        tree = {dev: _show(got.get(dev, set())).split(", ") for dev in sorted(want)}
        settings.setdefault(host, {})["qdisc_tree"] = tree
        problems += [f"{host}: {p}" for p in tree_problems(want, snapshot)]
    return problems
