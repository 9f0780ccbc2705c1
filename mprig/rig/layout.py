"""Virtual rig layout: which client interface, router and addresses each spec path gets.

Pure functions only. Every rig lives in its own set of namespaces (including its own
controller namespace for the management bridge), so the addresses below are the same in
every rig and never appear in the root namespace.

    path i (1-based, spec order)   client <-> router   10.i.1.0/24  client .2, router .1
                                   router <-> server   10.i.2.0/24  router .1, server .2
    server service address         10.0.0.1/32 on the server's dummy interface srv0
    management bridge (ctl ns)     10.254.0.0/24       ctl .1, hosts see MGMT_HOST_OCTET
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mprig.campaign.spec import Path
from mprig.errors import UsageError
from mprig.rig import addr6
from mprig.rig.host import PathLink

MAX_PATHS = 8
SERVER_ADDR = "10.0.0.1"  # what iperf3 and bulk transfers connect to
SERVER_IF = "srv0"  # dummy interface holding SERVER_ADDR
MGMT_NET = "10.254.0"  # management /24 inside the rig's ctl namespace
MGMT_PREFIX = 24
CTL_ADDR = f"{MGMT_NET}.1"  # bridge address in the ctl namespace (SSH and Ansible run there)
MGMT_IF = "mgmt0"  # management interface name on every host
ROUTER_CLIENT_IF = "lan0"  # router side of the client link (egress = download)
ROUTER_SERVER_IF = "wan0"  # router side of the server link (egress = upload)
TABLE_BASE = 100  # client policy routing: table TABLE_BASE + i for path i
RULE_PRIO_BASE = 1000  # client policy routing: rule priority RULE_PRIO_BASE + i

RIG_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
DEFAULT_RIG = "main"  # the rig `mprig run`, `mprig rig` and `mprig plan --commands` name

# Fixed management addresses: a host keeps its address whatever the path mix.
_MGMT_OCTET = {"client": 10, "server": 11, "ap": 12, "cell": 13}


@dataclass(frozen=True)
class PathAddrs:
    """Addresses of one path's two links (all /24)."""

    index: int  # 1-based position of the path in the spec
    client_addr: str  # client end of the client link
    router_client_addr: str  # router end of the client link (client's gateway)
    router_server_addr: str  # router end of the server link (server's gateway back)
    server_link_addr: str  # server end of the server link
    server_if: str  # server interface facing this router
    table: int  # client routing table for this path


def check_rig_name(name: str) -> str:
    """Return `name` if it is a valid rig name, else raise UsageError."""
    if not RIG_NAME_RE.match(name):
        raise UsageError(
            f"rig name {name!r}: use 1-12 lower-case letters or digits, starting with a letter"
        )
    return name


def layout(paths: Sequence[Path]) -> tuple[PathLink, ...]:
    """Map spec paths to client interfaces and routers, deterministically.

    First wifi path -> wlan0 via ap, first cellular -> wwan0 via cell; every other path gets
    the next free wlanN / wwanN / ethN (eth from 1) and a router r3, r4, ...
    """
    if not 1 <= len(paths) <= MAX_PATHS:
        raise UsageError(f"the virtual rig has 1 to {MAX_PATHS} paths, got {len(paths)}")
    prefix = {"wifi": "wlan", "cellular": "wwan", "wired": "eth"}
    next_if = {"wlan": 0, "wwan": 0, "eth": 1}
    first_router = {"wifi": "ap", "cellular": "cell"}
    next_router = 3
    links = []
    for i, path in enumerate(paths, start=1):
        stem = prefix[path.kind]
        client_if = f"{stem}{next_if[stem]}"
        next_if[stem] += 1
        router = first_router.pop(path.kind, "")
        if not router:
            router = f"r{next_router}"
            next_router += 1
        links.append(
            PathLink(
                name=path.name,
                kind=path.kind,
                client_if=client_if,
                client_addr=addr6.client_addr(i, path.family) or addresses(i).client_addr,
                router=router,
                router_client_if=ROUTER_CLIENT_IF,
                router_server_if=ROUTER_SERVER_IF,
                engine=path.engine,
                family=path.family,
            )
        )
    return tuple(links)


def addresses(index: int) -> PathAddrs:
    """Addresses of the path at 1-based position `index`."""
    return PathAddrs(
        index=index,
        client_addr=f"10.{index}.1.2",
        router_client_addr=f"10.{index}.1.1",
        router_server_addr=f"10.{index}.2.1",
        server_link_addr=f"10.{index}.2.2",
        server_if=f"p{index}",
        table=TABLE_BASE + index,
    )


def path_index(links: Sequence[PathLink], link: PathLink) -> int:
    """1-based position of `link` in `links` (the address plan key)."""
    return list(links).index(link) + 1


def hosts(links: Sequence[PathLink]) -> tuple[str, ...]:
    """Every host of a rig with these links: client, server, then routers in path order."""
    return ("client", "server", *(link.router for link in links))


def mgmt_addr(host: str) -> str:
    """Management address of `host` (fixed per host name)."""
    if host in _MGMT_OCTET:
        return f"{MGMT_NET}.{_MGMT_OCTET[host]}"
    match = re.fullmatch(r"r([3-9]|1[0-9])", host)
    if not match:
        raise ValueError(f"not a virtual rig host: {host!r}")
    return f"{MGMT_NET}.{20 + int(match.group(1))}"


def namespace(rig: str, host: str) -> str:
    """Network namespace of `host` in rig `rig` (host "ctl" is the controller)."""
    return f"mprig-{rig}-{host}"


def data_interfaces(links: Sequence[PathLink]) -> dict[str, tuple[str, ...]]:
    """Per host, the interfaces experiment traffic crosses (captures run on each, never on
    the management interface): the client's interface of every path, the server's link to
    every router, both arms of each router."""
    ifs: dict[str, tuple[str, ...]] = {
        "client": tuple(link.client_if for link in links),
        "server": tuple(addresses(i).server_if for i in range(1, len(links) + 1)),
    }
    for link in links:
        arms = (*ifs.get(link.router, ()), link.router_client_if, link.router_server_if)
        ifs[link.router] = tuple(dict.fromkeys(arms))
    return ifs
