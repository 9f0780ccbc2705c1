"""The virtual rig's IPv6 address plan (pure): unique local addresses (fd00::/8, RFC 4193),
laid out as the IPv4 plan in mprig/rig/layout.py so path i keeps its number in both.

    path i (1-based, spec order)   client <-> router   fd00:i:1::/64  client ::2, router ::1
                                   router <-> server   fd00:i:2::/64  router ::1, server ::2
    server service address         fd00::1/128 on the server's loopback (beside 10.0.0.1)

Also which service address a run's traffic targets and where the server listens, since the
initial subflow's family decides both (mprig/campaign/ipfamily.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

SERVER_ADDR6 = "fd00::1"  # what iperf3 connects to when the initial subflow is IPv6
PREFIX = 64  # every link's prefix length
DUAL_STACK = "::"  # iperf3 -B ::, no -4/-6: an AF_INET6 listener that takes IPv4 too


class HasFamily(Protocol):
    """A rig path (host.PathLink) as far as addressing goes."""

    @property
    def family(self) -> str: ...  # ipv4 | ipv6


@dataclass(frozen=True)
class PathAddrs6:
    """IPv6 addresses of one path's two links (all /64)."""

    index: int  # 1-based position of the path in the spec
    client_addr: str  # client end of the client link
    router_client_addr: str  # router end of the client link (client's gateway)
    router_server_addr: str  # router end of the server link (server's gateway back)
    server_link_addr: str  # server end of the server link
    client_net: str  # the client link's prefix, routed back by the server


def addresses6(index: int) -> PathAddrs6:
    """IPv6 addresses of the path at 1-based position `index` (hex digits of the index)."""
    return PathAddrs6(
        index=index,
        client_addr=f"fd00:{index:x}:1::2",
        router_client_addr=f"fd00:{index:x}:1::1",
        router_server_addr=f"fd00:{index:x}:2::1",
        server_link_addr=f"fd00:{index:x}:2::2",
        client_net=f"fd00:{index:x}:1::/{PREFIX}",
    )


def client_addr(index: int, family: str) -> str:
    """The client's address on path `index` for an IPv6 path; "" for IPv4 (layout's plan)."""
    return addresses6(index).client_addr if family == "ipv6" else ""


def uses_v6(links: Sequence[HasFamily]) -> bool:
    """Whether any of `links` is an IPv6 path."""
    return any(link.family == "ipv6" for link in links)


def mixed(links: Sequence[HasFamily]) -> bool:
    """Whether `links` (a variant's used paths) hold both families."""
    return {link.family for link in links} == {"ipv4", "ipv6"}


def target(server_addr: str, initial: HasFamily) -> str:
    """The address the client connects to: the rig's (IPv4) service address, or the IPv6
    one when the initial subflow's path is IPv6."""
    return SERVER_ADDR6 if initial.family == "ipv6" else server_addr


def service(server_addr: str, used: Sequence[HasFamily]) -> tuple[str, str]:
    """(target, listen) of a run's traffic over `used` (a variant's paths, initial first)."""
    return (target(server_addr, used[0]) if used else server_addr), listen_addr(server_addr, used)


def listen_addr(server_addr: str, used: Sequence[HasFamily]) -> str:
    """Where the server listens: its service address of the one family in use, or the
    dual-stack wildcard when both are (IPv4 subflows join an AF_INET6 connection, and
    their SYNs must find a listener on the IPv4 address too)."""
    if mixed(used):
        return DUAL_STACK
    return target(server_addr, used[0]) if used else server_addr


SIGNAL_ID = 1  # the server's one endpoint, when it has one


def endpoint_flags(link: HasFamily, used: Sequence[HasFamily]) -> list[str]:
    """Flags of a client endpoint: subflow; and fullmesh for an IPv4 path beside IPv6 ones,
    so the server's announced IPv4 address gets a subflow from each IPv4 endpoint (the
    kernel never pairs endpoints of two families; without fullmesh it would open one
    subflow from whichever IPv4 source the routes pick)."""
    return ["subflow", "fullmesh"] if mixed(used) and link.family == "ipv4" else ["subflow"]


def server_endpoints(server_addr: str, used: Sequence[HasFamily]) -> list[str]:
    """The server's endpoints, as `ip mptcp endpoint add` takes them: its IPv4 service
    address announced (ADD_ADDR) when the paths in use mix families, as the IPv4 subflows
    need an IPv4 address to join; none otherwise."""
    return [f"{server_addr} id {SIGNAL_ID} signal"] if mixed(used) else []
