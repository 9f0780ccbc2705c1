"""Shell helpers for native tests that build their own namespaces: run a command, run it
in a namespace, and join two namespaces by a veth pair ready for captures (addresses up,
TSO/GSO/GRO off)."""

from __future__ import annotations

import subprocess


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def ns(name: str, *argv: str) -> str:
    return sh("ip", "netns", "exec", name, *argv)


def veth_pair(a: tuple[str, str, str], b: tuple[str, str, str]) -> None:
    """A veth pair between two namespaces; each side (namespace, device, address/24) is
    addressed, up, and without offloads (no 64 KB super-segments in ss or captures)."""
    sh("ip", "link", "add", a[1], "netns", a[0], "type", "veth", "peer", b[1], "netns", b[0])
    for host, dev, addr in (a, b):
        sh("ip", "-n", host, "addr", "add", f"{addr}/24", "dev", dev)
        sh("ip", "-n", host, "link", "set", dev, "up")
        ns(host, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
