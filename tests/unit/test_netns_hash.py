"""netns.create_namespaces gives each host a socket hash of its own where the kernel can
(Linux 6.1: tcp_child_ehash_entries) and falls back to the shared one where it cannot; the
commands are recorded, none run (tests/integration/test_rig_virtual.py runs them)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mprig.rig import netns
from mprig.rig.host import PathLink

LINK = PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "lan0", "wan0")


def fake_kernel(monkeypatch: pytest.MonkeyPatch, per_netns_hash: bool) -> list[list[str]]:
    """A kernel whose child hash size reads back as written (or not at all, before 6.1)."""
    calls: list[list[str]] = []
    child = {"value": "0"}

    def sh(argv: Sequence[str], *, check: bool = True, timeout: float = 30.0) -> str:
        argv = list(argv)
        calls.append(argv)
        if argv[-3:] == ["sysctl", "-n", "net.ipv4.tcp_child_ehash_entries"]:
            return child["value"] + "\n" if per_netns_hash else ""
        if argv[-3:] == ["-n", *netns.SIZED_BY_EHASH]:
            return "256\n16384\n"
        if per_netns_hash and any(a.startswith("net.ipv4.tcp_child_ehash_entries=") for a in argv):
            child["value"] = argv[-1].split("=")[1]
        return ""

    monkeypatch.setattr(netns, "sh", sh)
    return calls


def build(
    monkeypatch: pytest.MonkeyPatch, per_netns_hash: bool
) -> tuple[netns.Topology, list[list[str]], list[list[str]]]:
    """create_namespaces on a fake kernel: the topology, every command, the `netns add`s."""
    calls = fake_kernel(monkeypatch, per_netns_hash)
    t = netns.Topology("t1", (LINK,))
    netns.create_namespaces(t)
    return t, calls, [c for c in calls if c[-3:-1] == ["netns", "add"]]


def test_hosts_are_created_from_ctl_with_a_hash_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t, calls, adds = build(monkeypatch, per_netns_hash=True)
    ctl, hosts = t.ns("ctl"), [t.ns(h) for h in t.hosts]
    assert adds == [["ip", "netns", "add", ctl]] + [
        ["nsenter", f"--net=/run/netns/{ctl}", "ip", "netns", "add", ns] for ns in hosts
    ]
    v6_calls = [c for c in calls if "net.ipv6.conf.all.disable_ipv6=1" in c]
    sets = {c[3]: c[c.index("-w") + 1 :] for c in v6_calls}  # ip netns exec NS sysctl -q -w
    limits = ["net.ipv4.tcp_max_syn_backlog=256", "net.ipv4.tcp_max_tw_buckets=16384"]
    v6 = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
    assert sets == {ctl: v6, **{ns: v6 + limits for ns in hosts}}


def test_a_kernel_without_per_namespace_hashes_gets_the_shared_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t, calls, adds = build(monkeypatch, per_netns_hash=False)
    assert adds == [["ip", "netns", "add", ns] for ns in t.namespaces]
    assert not [c for c in calls if any("tcp_max_syn_backlog=" in a for a in c)]
