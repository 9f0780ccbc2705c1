"""Campaign schema of a path's IP family (issue 18 part 5): `paths[].family: ipv4 | ipv6`.

A path over IPv6 gets ULA addresses on the virtual rig (mprig/rig/netns6.py). A campaign may
mix families: MPTCP then opens its initial subflow over IPv6 to the server's IPv6 address
(an AF_INET6 connection, the only kind that can hold subflows of both families) and adds
the IPv4 subflows towards the server's IPv4 address, which the server announces (ADD_ADDR).
So the initial subflow's path (a variant's first path) must be IPv6 whenever the variant
uses both families. Kept apart from mprig/campaign/spec.py, which calls `family_issues` from the
Campaign's cross-reference check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

Family = Literal["ipv4", "ipv6"]
DEFAULT: Family = "ipv4"

Loc = tuple[str | int, ...]

# What an IPv6 path cannot be combined with yet, and why (docs/campaign.md lists them).
_NO_TOOL = (
    "IPv6 paths carry iperf3 traffic only: the {tool} agent opens IPv4 sockets; use tool:"
    " iperf3 or family: ipv4"
)
_NO_PING = (
    "the latency probe sends ICMP (IPv4) echoes; leave ping_interval_ms unset with IPv6 paths"
)
_NO_CROSS = "cross traffic flows open IPv4 sockets; give IPv6 paths no cross_traffic"
_NO_BOTTLENECK = (
    "the shared bottleneck's IFB redirect filter matches IPv4 only (tc `protocol ip`);"
    " share IPv4 paths only"
)
_NO_NS3 = "the ns-3 engine's 802.11 link is built for IPv4; use engine: netem with IPv6"
_NO_LAB = (
    "a lab rig's addresses come from its inventory (mptcp_endpoints); family is for the virtual rig"
)
_NO_HWSIM = "the hwsim Wi-Fi link is addressed for IPv4; use rig.wifi: veth with IPv6 paths"
_NO_HANDOVER = (
    "a handover re-adds the path's endpoint with the subflow flag only; campaigns with IPv6"
    " paths do not support it yet"
)


def family_issues(campaign: Any) -> list[tuple[Loc, str]]:
    """Every combination an IPv6 path does not support in `campaign` (a spec.Campaign),
    and variants whose initial subflow would be IPv4 with IPv6 paths in use."""
    v6 = [i for i, p in enumerate(campaign.paths) if p.family == "ipv6"]
    if not v6:
        return []
    issues = [*_path_issues(campaign.paths, v6), *_campaign_issues(campaign, v6)]
    issues += _variant_issues(campaign.variants, campaign.paths)
    return list(dict.fromkeys(issues))  # variants without `paths` share one complaint


def _path_issues(paths: Sequence[Any], v6: list[int]) -> list[tuple[Loc, str]]:
    issues: list[tuple[Loc, str]] = []
    for i in v6:
        if paths[i].engine == "ns3":
            issues.append((("paths", i, "engine"), _NO_NS3))
        if paths[i].cross_traffic:
            issues.append((("paths", i, "cross_traffic"), _NO_CROSS))
    return issues


def _campaign_issues(campaign: Any, v6: list[int]) -> list[tuple[Loc, str]]:
    first: Loc = ("paths", v6[0], "family")
    issues: list[tuple[Loc, str]] = []
    if campaign.rig.inventory != "virtual":
        issues.append((first, _NO_LAB))
    if campaign.rig.wifi == "hwsim":
        issues.append((("rig", "wifi"), _NO_HWSIM))
    if campaign.traffic.tool != "iperf3":
        issues.append((("traffic", "tool"), _NO_TOOL.format(tool=campaign.traffic.tool)))
    if campaign.traffic.ping_interval_ms is not None:
        issues.append((("traffic", "ping_interval_ms"), _NO_PING))
    if campaign.shared_bottleneck is not None:
        issues.append((("shared_bottleneck",), _NO_BOTTLENECK))
    issues += [
        (("timeline", n, "action"), _NO_HANDOVER)
        for n, e in enumerate(campaign.timeline)
        if e.action == "handover"
    ]
    return issues


def _variant_issues(variants: Sequence[Any], paths: Sequence[Any]) -> list[tuple[Loc, str]]:
    """An MPTCP variant using both families must start on an IPv6 path."""
    family = {p.name: p.family for p in paths}
    issues: list[tuple[Loc, str]] = []
    for n, v in enumerate(variants):
        if v.protocol != "mptcp":
            continue
        used = [x for x in (v.paths or family) if x in family]
        if used and {family[x] for x in used} == {"ipv4", "ipv6"} and family[used[0]] == "ipv4":
            issues.append((_initial_loc(n, v), _initial_message(used[0])))
    return issues


def _initial_loc(n: int, variant: Any) -> Loc:
    return ("variants", n, "paths") if variant.paths else ("paths", 0, "family")


def _initial_message(name: str) -> str:
    return (
        f"the initial subflow goes over the first path ({name}, ipv4), which makes an IPv4"
        " connection that cannot add IPv6 subflows; with both families put an ipv6 path first"
    )
