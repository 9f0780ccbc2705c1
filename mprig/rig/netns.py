"""Build and remove the virtual rig's namespaces, links, addresses and routes.

Every command is an argv list run in the root namespace with `ip -n` / `ip netns exec`;
nothing is ever configured in the root namespace itself. The client link of a path is built
by a function looked up in CLIENT_LINKS by link type, so a path can use another link type
(mac80211_hwsim Wi-Fi) without touching the rest of the builder.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mprig.errors import HostError
from mprig.rig import layout as L
from mprig.rig.host import PathLink

OFFLOADS = ("tso", "gso", "gro", "lro")  # turned off on every rig interface


@dataclass(frozen=True)
class Topology:
    """What one virtual rig is made of."""

    rig: str  # rig name
    links: tuple[PathLink, ...]  # from layout()

    def ns(self, host: str) -> str:
        """Namespace of `host` ("ctl" for the controller)."""
        return L.namespace(self.rig, host)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every host (without ctl)."""
        return L.hosts(self.links)

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace of the rig, ctl first."""
        return (self.ns("ctl"), *(self.ns(h) for h in self.hosts))


def sh(argv: Sequence[str], *, check: bool = True, timeout: float = 30.0) -> str:
    """Run a root-namespace command; HostError naming the command on failure."""
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and p.returncode != 0:
        raise HostError("localhost", f"`{' '.join(argv)}` failed: {p.stderr.strip()}")
    return p.stdout


def ip(ns: str, *args: str, check: bool = True) -> str:
    """`ip -n ns args...`."""
    return sh(["ip", "-n", ns, *args], check=check)


def in_ns(ns: str, *argv: str, check: bool = True) -> str:
    """Run argv inside namespace `ns`."""
    return sh(["ip", "netns", "exec", ns, *argv], check=check)


def veth(ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
    """A veth pair created directly inside its two namespaces (never in the root one)."""
    ip(ns_a, "link", "add", "name", if_a, "type", "veth", "peer", "name", if_b, "netns", ns_b)
    ip(ns_a, "link", "set", if_a, "up")
    ip(ns_b, "link", "set", if_b, "up")


def addr(ns: str, dev: str, address: str, prefix: int = 24) -> None:
    """Add address/prefix to dev in ns."""
    ip(ns, "addr", "add", f"{address}/{prefix}", "dev", dev)


def offloads_off(ns: str, dev: str) -> None:
    """TSO/GSO/GRO/LRO off, so a captured segment is a wire packet (fixed features ignored)."""
    args = [x for f in OFFLOADS for x in (f, "off")]
    in_ns(ns, "ethtool", "-K", dev, *args, check=False)


def sysctl(ns: str, key: str, value: str) -> None:
    """Set a (per-namespace) sysctl inside ns."""
    in_ns(ns, "sysctl", "-q", "-w", f"{key}={value}")


# -- building blocks --------------------------------------------------------------------


# Each host's namespace gets a TCP established-socket hash of its own with EHASH_ENTRIES
# buckets (net.ipv4.tcp_child_ehash_entries, Linux 6.1) instead of sharing the kernel's,
# which has one bucket per 128 KB of RAM: 262144 on a 24 GB host, 32768 in the 4 GB campaign
# guest. Every socket dump (ss, the ss sampler, the RBPM controller) walks the whole table:
# under emulation that walk was 7.0 of the sampler's 12.1 ms a sample. A rig host holds a
# few dozen sockets. The kernel sizes tcp_max_syn_backlog and tcp_max_tw_buckets from the
# table; each host is given the values a shared table gives (ctl's), so nothing a run can
# see changes but the walk.
EHASH_ENTRIES = 1024
NETNS_DIR = "/run/netns"  # where `ip netns add` mounts a namespace
SIZED_BY_EHASH = ("net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_max_tw_buckets")


def own_hash_parent(parent: str) -> list[str] | None:
    """Make namespaces created from `parent` get their own hash; the sysctl assignments that
    give them `parent`'s hash-sized limits; None where the kernel has no per-namespace hash
    (before 6.1: they share the kernel's, as before)."""
    values = in_ns(parent, "sysctl", "-n", *SIZED_BY_EHASH, check=False).split()
    key = "net.ipv4.tcp_child_ehash_entries"
    if len(values) != len(SIZED_BY_EHASH):
        return None
    in_ns(parent, "sysctl", "-q", "-w", f"{key}={EHASH_ENTRIES}", check=False)
    if in_ns(parent, "sysctl", "-n", key, check=False).strip() != str(EHASH_ENTRIES):
        return None
    return [f"{k}={v}" for k, v in zip(SIZED_BY_EHASH, values, strict=True)]


def add_namespace(ns: str, parent: str | None = None) -> None:
    """`ip netns add ns`, from inside `parent`'s network namespace when given (only the
    network namespace is entered: the mount under NETNS_DIR lands where `ip` looks)."""
    enter = ["nsenter", f"--net={NETNS_DIR}/{parent}"] if parent else []
    sh([*enter, "ip", "netns", "add", ns])


def create_namespaces(topo: Topology) -> None:
    """Every namespace, loopback up, IPv6 off (mprig/rig/netns6.py turns it on where used);
    the hosts' from ctl's, each with a socket hash of its own (EHASH_ENTRIES)."""
    ctl, *hosts = topo.namespaces
    add_namespace(ctl)
    limits = own_hash_parent(ctl)
    for ns in hosts:
        add_namespace(ns, ctl if limits is not None else None)
    # IPv4 only: no router solicitations or MLD reports in the captures
    v6_off = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
    for ns in topo.namespaces:
        ip(ns, "link", "set", "lo", "up")
        own = limits if limits is not None and ns != ctl else []
        in_ns(ns, "sysctl", "-q", "-w", *v6_off, *own)


def management(topo: Topology) -> None:
    """Bridge br0 in ctl, one veth per host onto it, management addresses."""
    ctl = topo.ns("ctl")
    ip(ctl, "link", "add", "name", "br0", "type", "bridge")
    ip(ctl, "link", "set", "br0", "up")
    addr(ctl, "br0", L.CTL_ADDR, L.MGMT_PREFIX)
    for host in topo.hosts:
        peer = f"m-{host}"
        veth(topo.ns(host), L.MGMT_IF, ctl, peer)
        ip(ctl, "link", "set", peer, "master", "br0")
        addr(topo.ns(host), L.MGMT_IF, L.mgmt_addr(host), L.MGMT_PREFIX)
        offloads_off(topo.ns(host), L.MGMT_IF)
        offloads_off(ctl, peer)


def veth_client_link(topo: Topology, link: PathLink, a: L.PathAddrs) -> None:
    """Default client link: a veth between the client and the path's router."""
    client, router = topo.ns("client"), topo.ns(link.router)
    veth(client, link.client_if, router, link.router_client_if)
    addr(client, link.client_if, a.client_addr)
    addr(router, link.router_client_if, a.router_client_addr)
    offloads_off(client, link.client_if)
    offloads_off(router, link.router_client_if)


ClientLinkBuilder = Callable[[Topology, PathLink, L.PathAddrs], None]
CLIENT_LINKS: dict[str, ClientLinkBuilder] = {"veth": veth_client_link}
"""Client link builders by link type; a builder must leave client_if and router_client_if
up with the path's addresses (see PathAddrs) and offloads off."""


def server_link(topo: Topology, link: PathLink, a: L.PathAddrs) -> None:
    """veth router <-> server, addresses and the routes between them."""
    router, server = topo.ns(link.router), topo.ns("server")
    veth(router, link.router_server_if, server, a.server_if)
    addr(router, link.router_server_if, a.router_server_addr)
    addr(server, a.server_if, a.server_link_addr)
    offloads_off(router, link.router_server_if)
    offloads_off(server, a.server_if)
    ip(router, "route", "add", f"{L.SERVER_ADDR}/32", "via", a.server_link_addr)
    ip(server, "route", "add", f"10.{a.index}.1.0/24", "via", a.router_server_addr)
    sysctl(router, "net.ipv4.ip_forward", "1")


def client_routing(topo: Topology, link: PathLink, a: L.PathAddrs, first: bool) -> None:
    """One table per client interface and `ip rule from <addr>`; the first path is default."""
    client = topo.ns("client")
    gw = a.router_client_addr
    ip(client, "route", "add", "default", "via", gw, "dev", link.client_if, "table", str(a.table))
    prio = str(L.RULE_PRIO_BASE + a.index)
    ip(client, "rule", "add", "from", a.client_addr, "table", str(a.table), "priority", prio)
    if first:
        ip(client, "route", "add", "default", "via", gw, "dev", link.client_if)


def server_address(topo: Topology) -> None:
    """The service address on the server's own loopback (reachable through every path)."""
    addr(topo.ns("server"), "lo", L.SERVER_ADDR, 32)


def build(topo: Topology, link_types: dict[str, str] | None = None) -> None:
    """Create the whole data and management plane of a rig (no daemons)."""
    create_namespaces(topo)
    management(topo)
    for ns in (topo.ns("client"), topo.ns("server")):
        sysctl(ns, "net.ipv4.conf.all.rp_filter", "0")
        sysctl(ns, "net.ipv4.conf.default.rp_filter", "0")
    server_address(topo)
    v4 = [(i, link) for i, link in enumerate(topo.links, start=1) if link.family == "ipv4"]
    for i, link in v4:  # IPv6 paths: mprig/rig/netns6.py
        a = L.addresses(i)
        builder = CLIENT_LINKS[(link_types or {}).get(link.name, "veth")]
        builder(topo, link, a)
        server_link(topo, link, a)
        client_routing(topo, link, a, first=link is v4[0][1])


# -- inspection and removal -------------------------------------------------------------


def existing_namespaces(rig: str) -> list[str]:
    """Namespaces of rig `rig` that exist now."""
    out = sh(["ip", "netns", "list"], check=False)
    prefix = L.namespace(rig, "")
    return sorted(
        n for n in (line.split()[0] for line in out.splitlines() if line) if n.startswith(prefix)
    )


def pids_in(ns: str) -> list[int]:
    """Processes living in namespace ns."""
    out = sh(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def delete_namespace(ns: str) -> None:
    """Delete one namespace (its links and qdiscs go with it)."""
    sh(["ip", "netns", "delete", ns], check=False)
