"""A shared bottleneck on the virtual rig: several paths converge on one shaped link.

The server's links to the routers of the bottleneck's paths send (and receive) through one
IFB device per direction: a `clsact` filter on each of those links redirects every packet
to it, and the IFB's qdisc (netem, or the bench's tbf stand-in, as on the routers) shapes
them all at one rate with one queue, before they go on through their own links. So the
subflows of an MPTCP connection on those paths and any flow crossing them share a queue
and a rate, the setting of RFC 6356's fairness goal, without a new host in the rig.
Devices and filters are made for each run and removed after it (the rig's teardown check
finds any left over).
"""

from __future__ import annotations

import os

from mprig.campaign.crossspec import SharedBottleneck
from mprig.campaign.spec import Direction
from mprig.rig import layout
from mprig.rig.host import PathLink
from mprig.run import impair

DOWN_DEV = "mpbtl-down"  # IFB shaping server -> client (the egress of the server's links)
UP_DEV = "mpbtl-up"  # IFB shaping client -> server (their ingress)
# What a run killed before its teardown may have left (the rig is reused): $1 and $2 the
# IFBs, then the server's links; a constant script, the names its arguments.
CLEAN = (
    'for d in "$1" "$2"; do ip link del "$d"; done 2>/dev/null; shift 2; '
    'for d; do tc qdisc del dev "$d" clsact; done 2>/dev/null; true'
)
_ALL_IP = ["protocol", "ip", "u32", "match", "u32", "0", "0"]


def direction(b: SharedBottleneck) -> Direction:
    """The bottleneck's shaping, one direction (both are shaped alike)."""
    return Direction(rate_mbit=b.rate_mbit, delay_ms=b.delay_ms, limit_pkts=b.limit_pkts)


def shaper_argv(dev: str, d: Direction) -> list[str]:
    """netem at the bottleneck's rate, delay and queue, added to a fresh IFB (or the
    bench's tbf stand-in where the kernel has no netem, as on the routers)."""
    if os.environ.get(impair.STANDIN_ENV) == "1":  # the queue is limit_pkts full frames
        limit = str(d.limit_pkts * impair.MTU_BITS // 8)
        tbf = ["tbf", "rate", f"{d.rate_mbit:g}mbit", "burst", "32kb", "limit", limit]
        return ["tc", "qdisc", "add", "dev", dev, "root", *tbf]
    return ["tc", "qdisc", "add", "dev", dev, "root", "netem", *impair.netem_args(d)]


def server_ifs(b: SharedBottleneck, links: tuple[PathLink, ...]) -> list[str]:
    """The server's link to each router of the bottleneck's paths (virtual rig layout)."""
    index = {link.name: i for i, link in enumerate(links, start=1)}
    return [layout.addresses(index[name]).server_if for name in b.paths]


def setup_commands(
    b: SharedBottleneck | None, links: tuple[PathLink, ...]
) -> list[tuple[str, list[str]]]:
    """(host, argv) on the server: the two IFBs with their qdisc, the redirects to them."""
    if b is None:
        return []
    ifs = server_ifs(b, links)
    out = [("server", ["bash", "-c", CLEAN, "mprig-bottleneck", DOWN_DEV, UP_DEV, *ifs])]
    for dev in (DOWN_DEV, UP_DEV):
        out += [("server", ["ip", "link", "add", dev, "type", "ifb"])]
        out += [("server", ["ip", "link", "set", dev, "up"])]
    out += [("server", shaper_argv(dev, direction(b))) for dev in (DOWN_DEV, UP_DEV)]
    for dev in ifs:
        out.append(("server", ["tc", "qdisc", "add", "dev", dev, "clsact"]))
        for hook, ifb in (("egress", DOWN_DEV), ("ingress", UP_DEV)):
            redirect = ["action", "mirred", "egress", "redirect", "dev", ifb]
            out.append(("server", ["tc", "filter", "add", "dev", dev, hook, *_ALL_IP, *redirect]))
    return out


def teardown_commands(
    b: SharedBottleneck | None, links: tuple[PathLink, ...]
) -> list[tuple[str, list[str]]]:
    """(host, argv) removing the redirects and the IFBs (their qdiscs go with them)."""
    if b is None:
        return []
    out = [("server", ["tc", "qdisc", "del", "dev", dev, "clsact"]) for dev in server_ifs(b, links)]
    return out + [("server", ["ip", "link", "del", dev]) for dev in (DOWN_DEV, UP_DEV)]


WATCH_LOG = "tc-bottleneck.txt"  # in the bundle: the shared queue's counters, before and after
# The shared queue's qdiscs and counters (sent, dropped, overlimits, backlog) when the run's
# background starts and when the stop stage ends it (TERM), each IFB's under `## <dev>`:
# $1 and $2 the IFBs.
WATCH = (
    'snap() { printf "# %s %s\\n" "$1" "$EPOCHREALTIME"; for d in "$2" "$3"; do '
    'printf "## %s\\n" "$d"; tc -s qdisc show dev "$d"; done; }; '
    'trap \'snap after "$1" "$2"; exit 0\' TERM; '
    'snap before "$1" "$2"; sleep infinity & wait'
)


def watch_argv() -> list[str]:
    """The background command writing WATCH_LOG on the server (the settings read back)."""
    return ["bash", "-c", WATCH, "mprig-bottleneck", DOWN_DEV, UP_DEV]
