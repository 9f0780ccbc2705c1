"""A lab campaign's teardown, verified (mprig.stack.isolation.teardown_*): what is read on which
host, and every setting left changed named with its host, BPF congestion controls that
stayed registered included."""

from __future__ import annotations

from mprig.rig.host import PathLink
from mprig.stack import isolation, knobs
from mprig.stack.isolation import HostSettings

LINKS = (
    PathLink("wifi", "wifi", "wlan0", "198.51.100.130", "rwifi", "eth1", "eth2"),
    PathLink("cell", "cellular", "wwan0", "10.64.0.2", "rcell", "eth1", "eth2"),
)
ALLOWED = "net.ipv4.tcp_allowed_congestion_control"


def test_devices_add_every_hosts_data_interfaces() -> None:
    data = {"client": ("wlan0", "wwan0"), "server": ("eth1",), "ap": ("wlan0", "eth1")}
    assert isolation.teardown_devices(LINKS, data) == {
        "client": ["wlan0", "wwan0"],
        "rwifi": ["eth1", "eth2"],
        "rcell": ["eth1", "eth2"],
        "server": ["eth1"],
        "ap": ["wlan0", "eth1"],
    }


def test_argv_reads_the_congestion_control_lists_on_every_host() -> None:
    argv = isolation.teardown_argv(["net.ipv4.tcp_rmem"], ["eth1"])
    assert argv[4:] == [
        "mptcp offloads",
        f"net.ipv4.tcp_rmem {knobs.AVAILABLE_CC} {ALLOWED} net.ipv4.tcp_congestion_control "
        f"{knobs.AVAILABLE_CC}",
        "eth1",
    ]


def host(cc: str = "reno cubic", rmem: str = "4096 131072 6291456", qdisc: str = "mq",
         endpoints: tuple[str, ...] = ()) -> HostSettings:  # fmt: skip
    return HostSettings(
        sysctls={knobs.AVAILABLE_CC: cc, ALLOWED: "reno cubic", "net.ipv4.tcp_rmem": rmem},
        mptcp_limits={"subflows": "8", "add_addr_accepted": "8"},
        endpoints=endpoints,
        devices={"eth1": {"qdisc": qdisc, "tso": "off"}},
    )


def test_a_clean_teardown_has_nothing_to_say() -> None:
    before = {"client": host(), "server": host(), "rwifi": host()}
    assert isolation.teardown_diff(before, dict(before)) == []


def test_every_leftover_is_named_with_its_host() -> None:
    before = {"client": host(), "server": host(), "rwifi": host()}
    after = {
        "client": host(cc="reno cubic prr door", endpoints=("10.64.0.2 id 2 subflow dev wwan0",)),
        "server": host(rmem="4096 87380 6291456"),
        "rwifi": host(qdisc="netem"),
    }
    assert isolation.teardown_diff(before, after) == [
        "client: congestion controls registered during the campaign, still registered: door prr",
        "client mptcp endpoints: before 'none', after '10.64.0.2 id 2 subflow dev wwan0'",
        "server sysctl net.ipv4.tcp_rmem: before '4096 131072 6291456', after '4096 87380 6291456'",
        "rwifi eth1 qdisc: before 'mq', after 'netem'",
    ]


def test_a_host_that_stopped_answering_is_reported_unreadable() -> None:
    before = {"server": host(cc="reno cubic lia")}
    assert isolation.teardown_diff(before, {}) == [
        "server: congestion controls no longer registered: cubic lia reno",
        f"server sysctl {ALLOWED}: before 'reno cubic', after 'unreadable'",
        "server sysctl net.ipv4.tcp_rmem: before '4096 131072 6291456', after 'unreadable'",
        "server mptcp limit subflows: before '8', after 'unreadable'",
        "server mptcp limit add_addr_accepted: before '8', after 'unreadable'",
        "server eth1 qdisc: before 'mq', after 'unreadable'",
        "server eth1 tso: before 'off', after 'unreadable'",
    ]
