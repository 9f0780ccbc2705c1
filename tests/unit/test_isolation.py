"""Run isolation (mprig.stack.isolation): reading settings back, what a run must read back on top
of the baseline, the differences named, and the commands that put the baseline back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mprig.campaign.spec import Variant
from mprig.rig.host import PathLink
from mprig.stack import isolation, knobs
from mprig.stack.isolation import HostSettings

CAPTURES = Path(__file__).parent.parent / "captures" / "test_isolation"
LINKS = (
    PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "lan0", "wan0"),
    PathLink("cell", "cellular", "wwan0", "10.2.1.2", "cell", "lan0", "wan0"),
)
AVAILABLE = "reno bbr cubic"


def _host(
    sysctls: dict[str, str],
    mptcp_limits: dict[str, str],
    devices: dict[str, dict[str, str]] | None = None,
) -> HostSettings:
    all_sysctls = {**sysctls, knobs.AVAILABLE_CC: AVAILABLE}
    return HostSettings(sysctls=all_sysctls, mptcp_limits=mptcp_limits, devices=devices or {})


def _baseline() -> isolation.Settings:
    """The rig before the campaign: defaults, kernel limits, no endpoints, noqueue."""
    keys = isolation.campaign_keys([Variant(name="a", rmem=60000), Variant(name="b", wmem=70000)])
    defaults = {
        "net.ipv4.tcp_rmem": "4096 131072 33554432",
        "net.ipv4.tcp_wmem": "4096 16384 4194304",
    }
    sysctls = {k: defaults.get(k, "0") for k in keys}
    limits = {"add_addr_accepted": "0", "subflows": "2"}
    offloads = {"tso": "off", "gso": "off", "gro": "off", "lro": "off [fixed]"}
    routers = {"lan0": {"qdisc": "noqueue", **offloads}, "wan0": {"qdisc": "noqueue", **offloads}}
    return {
        "client": _host(sysctls, mptcp_limits=limits,
                        devices={"wlan0": {"qdisc": "noqueue", **offloads}}),
        "server": _host(sysctls, mptcp_limits=limits),
        "ap": HostSettings(mptcp_limits=limits, devices=routers),
    }  # fmt: skip


def test_parse_real_read_script_output() -> None:
    text = (CAPTURES / "read_script_output.txt").read_text()
    offloads = {"tso": "off", "gso": "off", "gro": "off", "lro": "off [fixed]"}
    assert isolation.parse(text) == HostSettings(
        sysctls={
            "net.ipv4.tcp_rmem": "4096 131072 33554432",  # tabs collapsed
            "net.ipv4.tcp_sack": "1",  # net.mptcp.no_such was asked for: not reported
            knobs.AVAILABLE_CC: "reno bbr cubic prr_v0 cwa_v0 lia_v0",
        },
        mptcp_limits={"add_addr_accepted": "8", "subflows": "8"},
        endpoints=("10.1.1.2 id 1 subflow dev wlan0",),
        devices={
            "wlan0": offloads,  # down: tc shows no qdisc
            "lan0": {"qdisc": "tbf", "tso": "on", "gso": "on", "gro": "off", "lro": "off [fixed]"},
        },
    )


def test_read_argv_passes_names_and_devices_as_arguments() -> None:
    argv = isolation.read_argv(["net.ipv4.tcp_sack"], ["wlan0"])
    assert argv == ["bash", "-c", isolation.READ_SCRIPT, "mprig-settings", "mptcp offloads",
                    f"net.ipv4.tcp_sack {knobs.AVAILABLE_CC}", "wlan0"]  # fmt: skip
    # a router: no sysctls, no MPTCP limits or endpoints; each run: no offloads either
    assert isolation.read_argv([], ["lan0", "wan0"], offloads=False)[4:] == [
        "",
        "",
        "lan0",
        "wan0",
    ]


def test_a_run_compares_qdiscs_but_not_the_offloads_it_does_not_read() -> None:
    full = isolation.HostSettings(
        devices={"lan0": {"qdisc": "netem", "tso": "off", "gso": "off"}, "wlan0": {}}
    )
    assert isolation.without_offloads({"ap": full})["ap"].devices == {
        "lan0": {"qdisc": "netem"},
        "wlan0": {},
    }


def test_devices_per_host() -> None:
    assert isolation.devices(LINKS) == {
        "client": ["wlan0", "wwan0"],
        "ap": ["lan0", "wan0"],
        "cell": ["lan0", "wan0"],
    }


def test_before_a_run_every_other_variants_knob_goes_back() -> None:
    base = _baseline()
    cmds = isolation.restore_sysctls(base, Variant(name="b", wmem=70000))
    restored = ["net.ipv4.tcp_rmem=4096 131072 33554432"]
    assert [(h, argv[3:]) for h, argv in cmds] == [("client", restored), ("server", restored)]
    assert all(argv[:3] == ["sysctl", "-q", "-w"] for _, argv in cmds)


def test_expected_is_the_baseline_with_the_variant_on_top() -> None:
    base = _baseline()
    variant = Variant(name="b", paths=("wifi",), wmem=70000, recovery="nopr")
    setup = [("ap", ["tc", "qdisc", "replace", "dev", "lan0", "root", "netem", "delay", "1ms"])]
    want = isolation.expected(base, variant, LINKS, setup)
    client = want["client"]
    assert client.sysctls["net.ipv4.tcp_wmem"] == "4096 16384 70000"
    assert client.sysctls["net.ipv4.tcp_rmem"] == "4096 131072 33554432"  # the baseline's
    assert client.sysctls["net.ipv4.tcp_frto"] == "0"
    assert client.mptcp_limits == {"subflows": "8", "add_addr_accepted": "8"}
    assert client.endpoints == ("10.1.1.2 id 1 subflow dev wlan0",)
    assert want["server"].endpoints == ()
    assert want["ap"].devices["lan0"]["qdisc"] == "netem"
    assert want["ap"].devices["wan0"] == base["ap"].devices["wan0"]
    assert base["ap"].devices["lan0"]["qdisc"] == "noqueue"  # the baseline is not changed


def test_diff_names_every_difference() -> None:
    base = _baseline()
    variant = Variant(name="b", paths=("wifi",), wmem=70000)
    want = isolation.expected(base, variant, LINKS, [])
    assert isolation.diff(want, want) == []
    leaked = dict(want.items())
    sysctls = {**want["client"].sysctls, "net.ipv4.tcp_rmem": "4096 60000 60000"}
    del sysctls["net.ipv4.tcp_sack"]
    sysctls[knobs.AVAILABLE_CC] = "reno bbr cubic prr"  # a BPF cc registered meanwhile: fine
    leaked["client"] = HostSettings(
        sysctls=sysctls,
        mptcp_limits=want["client"].mptcp_limits,
        endpoints=("10.1.1.2 id 1 subflow dev wlan0", "10.2.1.2 id 2 subflow dev wwan0"),
        devices={"wlan0": {**want["client"].devices["wlan0"], "gro": "on"}},
    )
    assert isolation.diff(want, leaked) == [
        "client sysctl net.ipv4.tcp_sack: spec '1', host 'unreadable'",
        "client sysctl net.ipv4.tcp_rmem: spec '4096 131072 33554432', host '4096 60000 60000'",
        "client mptcp endpoints: spec '10.1.1.2 id 1 subflow dev wlan0', host "
        "'10.1.1.2 id 1 subflow dev wlan0; 10.2.1.2 id 2 subflow dev wwan0'",
        "client wlan0 gro: spec 'off', host 'on'",
    ]


def test_restore_all_at_the_campaign_end() -> None:
    base = _baseline()
    base["client"] = HostSettings(
        sysctls={"net.ipv4.tcp_sack": "1", knobs.AVAILABLE_CC: AVAILABLE},
        mptcp_limits={"add_addr_accepted": "0", "subflows": "2"},
        endpoints=("10.9.0.1 id 3 subflow backup dev v0",),
        devices={"wlan0": {"qdisc": "noqueue", "tso": "on", "lro": "off [fixed]"}},
    )
    del base["server"]
    assert isolation.restore_all(base) == [
        ("client", ["sysctl", "-q", "-w", "net.ipv4.tcp_sack=1"]),
        ("client", ["ip", "mptcp", "limits", "set", "add_addr_accepted", "0", "subflows", "2"]),
        ("client", ["ip", "mptcp", "endpoint", "flush"]),
        ("client", ["ip", "mptcp", "endpoint", "add", "10.9.0.1", "id", "3", "subflow",
                    "backup", "dev", "v0"]),
        ("client", ["ethtool", "-K", "wlan0", "tso", "on"]),
        ("ap", ["ethtool", "-K", "lan0", "tso", "off", "gso", "off", "gro", "off"]),
        ("ap", ["ethtool", "-K", "wan0", "tso", "off", "gso", "off", "gro", "off"]),
    ]  # fmt: skip


def test_a_stored_baseline_wins_over_live_values() -> None:
    live = _baseline()
    polluted = {**live["client"].sysctls, "net.ipv4.tcp_rmem": "4096 60000 60000"}
    live["client"] = HostSettings(
        sysctls=polluted,
        mptcp_limits={"add_addr_accepted": "8", "subflows": "8"},
        endpoints=("10.1.1.2 id 1 subflow dev wlan0",),
        devices=live["client"].devices,
    )
    stored = {h: s.as_json() for h, s in _baseline().items()}
    del stored["client"]["sysctls"]["net.ipv4.tcp_wmem"]  # a key the earlier campaign lacked
    got = isolation.overlay(live, stored)
    assert got["client"].sysctls["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    assert got["client"].sysctls["net.ipv4.tcp_wmem"] == "4096 16384 4194304"  # live
    assert got["client"].mptcp_limits == {"add_addr_accepted": "0", "subflows": "2"}
    assert got["client"].endpoints == ()
    assert got["ap"] == live["ap"]


def test_the_read_back_starts_tc_only_where_it_reads_interfaces(tmp_path: Path) -> None:
    """Under VM emulation every program costs 0.1-0.3 s: a host whose interfaces are not
    read (the server) gets no `tc qdisc show`; a router's are read from one."""
    import os
    import subprocess

    calls = tmp_path / "started"
    for tool in ("tc", "ip"):
        stand_in = tmp_path / tool
        stand_in.write_text(f"#!/bin/sh\necho {tool} >> {calls}\n")
        stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}

    def started(devs: list[str]) -> list[str]:
        calls.unlink(missing_ok=True)
        argv = isolation.read_argv(["net.ipv4.tcp_sack"], devs, offloads=False)
        subprocess.run(argv, env=env, check=True, capture_output=True, timeout=30)
        return calls.read_text().split() if calls.exists() else []

    assert started([]) == ["ip"]
    assert started(["lan0", "wan0"]) == ["ip", "tc"]


def test_the_flush_report_is_read_and_junk_is_not() -> None:
    assert isolation.flushed("tcp_metrics 3 0\n") == {"tcp_metrics": 3, "tcp_metrics_left": 0}
    assert isolation.flushed("noise\ntcp_metrics 12 1") == {
        "tcp_metrics": 12,
        "tcp_metrics_left": 1,
    }
    for junk in ("", "tcp_metrics", "tcp_metrics 3", "tcp_metrics x 0", "tcp_metrics -1 0"):
        assert isolation.flushed(junk) == {}, junk


def test_the_flush_script_counts_what_ip_printed(tmp_path: Path) -> None:
    """FLUSH_SCRIPT against a stand-in `ip` (the real one is exercised by
    test_run_isolation): two entries before the flush, none after, and a failing `ip`
    fails the script with a message instead of reporting 0."""
    state = tmp_path / "entries"
    state.write_text("10.0.0.2 age 1sec rtt 30us\nfd00::2 age 1sec rtt 40us\n")
    ip = tmp_path / "ip"
    lo = "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT\n"
    lo += "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n    altname loop0\n"
    (tmp_path / "lo").write_text(lo)
    ip.write_text(
        "#!/bin/bash\n"
        "[[ $1 == -6 ]] && exit 0\n"
        f'while IFS= read -r l; do case $l in "tcp_metrics show") cat {state};; '
        f'"tcp_metrics flush all") : > {state};; "link show dev lo") cat {tmp_path}/lo;; '
        "esac; done\n"
    )
    ip.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}

    def run() -> subprocess.CompletedProcess[str]:
        argv = isolation.FLUSH_ARGV
        return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)

    assert isolation.flushed(run().stdout) == {"tcp_metrics": 2, "tcp_metrics_left": 0}
    assert isolation.flushed(run().stdout) == {"tcp_metrics": 0, "tcp_metrics_left": 0}
    # an entry the flush left (shown after lo's block) is counted as left, not as flushed
    ip.write_text(ip.read_text().replace(f": > {state}", ":"))
    state.write_text("10.0.0.2 age 1sec rtt 30us\n")
    assert isolation.flushed(run().stdout) == {"tcp_metrics": 1, "tcp_metrics_left": 1}
    (tmp_path / "lo").write_text("")  # no marker: the two shows cannot be told apart
    unsplit = run()
    assert unsplit.returncode == 1 and "no link block for lo" in unsplit.stderr
    assert isolation.flushed(unsplit.stdout) == {}
    ip.write_text("#!/bin/sh\necho 'Object \"tcp_metrics\" is unknown' >&2\nexit 1\n")
    failed = run()
    assert failed.returncode == 1 and "could not flush the TCP metrics cache" in failed.stderr
