"""Build the IPv6 paths of a virtual rig (after mprig/rig/netns.py built the rest).

netns.create_namespaces turns IPv6 off everywhere, so that IPv4 rigs see no router
solicitations or MLD reports in their captures. Here IPv6 comes back only where an IPv6
path needs it: the server's loopback (fd00::1), both ends of each IPv6 path's two links,
and forwarding on its router. Interfaces are switched on with DAD off (accept_dad=0, and
addresses added `nodad`), so they are usable at once rather than after a second of
tentative state; router advertisements, autoconfiguration and solicitations stay off, as
the addresses and routes are all static. An IPv6 path has no IPv4 address: every packet
it carries is IPv6.
"""

from __future__ import annotations

from mprig.rig import addr6, netns
from mprig.rig import layout as L
from mprig.rig.host import PathLink
from mprig.rig.netns import Topology, ip

# per interface, before disable_ipv6=0: no DAD, no RA/SLAAC, no router solicitations
_QUIET = {"accept_dad": "0", "dad_transmits": "0", "accept_ra": "0", "autoconf": "0"}
_QUIET["router_solicitations"] = "0"


def enable(ns: str, dev: str) -> None:
    """IPv6 on for `dev` in `ns`, quietly (see the module docstring)."""
    keys = [f"net.ipv6.conf.{dev}.{k}={v}" for k, v in _QUIET.items()]
    netns.in_ns(ns, "sysctl", "-q", "-w", *keys, f"net.ipv6.conf.{dev}.disable_ipv6=0")


def addr(ns: str, dev: str, address: str, prefix: int = addr6.PREFIX) -> None:
    """Add an IPv6 address usable at once (nodad)."""
    ip(ns, "-6", "addr", "add", f"{address}/{prefix}", "dev", dev, "nodad")


def _link(ns_a: str, if_a: str, addr_a: str, ns_b: str, if_b: str, addr_b: str) -> None:
    """A veth pair with IPv6 on both ends, offloads off."""
    netns.veth(ns_a, if_a, ns_b, if_b)
    for ns, dev, address in ((ns_a, if_a, addr_a), (ns_b, if_b, addr_b)):
        enable(ns, dev)
        addr(ns, dev, address)
        netns.offloads_off(ns, dev)


def path(topo: Topology, link: PathLink, index: int, first: bool) -> None:
    """Both links of one IPv6 path, the routes through its router, the client's policy
    routing (table and rule as for IPv4, netns.client_routing); `first`: the client's
    default IPv6 route goes this way."""
    a, a4 = addr6.addresses6(index), L.addresses(index)
    client, router, server = topo.ns("client"), topo.ns(link.router), topo.ns("server")
    _link(client, link.client_if, a.client_addr, router, link.router_client_if,
          a.router_client_addr)  # fmt: skip
    _link(router, link.router_server_if, a.router_server_addr, server, a4.server_if,
          a.server_link_addr)  # fmt: skip
    netns.sysctl(router, "net.ipv6.conf.all.forwarding", "1")
    ip(router, "-6", "route", "add", f"{addr6.SERVER_ADDR6}/128", "via", a.server_link_addr)
    ip(server, "-6", "route", "add", a.client_net, "via", a.router_server_addr)
    gw, table = a.router_client_addr, str(a4.table)
    ip(client, "-6", "route", "add", "default", "via", gw, "dev", link.client_if, "table", table)
    prio = str(L.RULE_PRIO_BASE + index)
    ip(client, "-6", "rule", "add", "from", a.client_addr, "table", table, "priority", prio)
    if first:
        ip(client, "-6", "route", "add", "default", "via", gw, "dev", link.client_if)


def build(topo: Topology) -> None:
    """Every IPv6 path of `topo`, and the server's IPv6 service address if there is one."""
    v6 = [(i, link) for i, link in enumerate(topo.links, start=1) if link.family == "ipv6"]
    if not v6:
        return
    server = topo.ns("server")
    enable(server, "lo")
    addr(server, "lo", addr6.SERVER_ADDR6, 128)
    for n, (i, link) in enumerate(v6):
        path(topo, link, i, first=n == 0)
