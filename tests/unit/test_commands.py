"""The exact per-host command list of a run (shared by `plan --commands` and the runner)."""

from __future__ import annotations

import dataclasses

from mprig.campaign.plan import Run
from mprig.campaign.spec import Capture, Direction, Path, Traffic, Variant
from mprig.rig.host import PathLink
from mprig.run import commands
from mprig.stack import knobs

LINKS = (
    PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "ap-c", "ap-s"),
    PathLink("cell", "cellular", "wwan0", "10.2.1.2", "cell", "cell-c", "cell-s"),
)
PATHS = (
    Path(name="wifi", kind="wifi", down=Direction(rate_mbit=20, delay_ms=10),
         up=Direction(rate_mbit=20, delay_ms=10)),
    Path(name="cell", kind="cellular", down=Direction(rate_mbit=10, delay_ms=40),
         up=Direction(rate_mbit=10, delay_ms=40)),
)  # fmt: skip


def make_run(variant: Variant, traffic: Traffic | None = None) -> Run:
    return Run(
        run_id="r1",
        index=0,
        repetition=1,
        seed=7,
        variant=variant,
        paths=PATHS,
        traffic=traffic or Traffic(duration_s=5),
        capture=Capture(snaplen=160),
    )


def test_mptcp_download_full_command_list() -> None:
    cmds = commands.for_run(make_run(Variant(name="mptcp")), LINKS, server_addr="10.9.0.1")
    sysctl = ["sysctl", "-q", "-w", "net.ipv4.tcp_sack=1", "net.ipv4.tcp_dsack=1",
              "net.ipv4.tcp_frto=2", "net.ipv4.tcp_timestamps=1", "net.ipv4.tcp_recovery=1",
              "net.ipv4.tcp_early_retrans=3", "net.ipv4.tcp_reordering=3",
              "net.ipv4.tcp_max_reordering=300", "net.ipv4.tcp_congestion_control=cubic",
              "net.mptcp.enabled=1", "net.mptcp.pm_type=0"]  # fmt: skip
    limits = ["ip", "mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8"]
    netem = ["tc", "qdisc", "replace", "dev"]
    d = "/tmp/mprig-virtual/r1"
    assert cmds == [
        ("client", sysctl),
        ("server", sysctl),
        ("server", limits),
        ("client", knobs.ip_batch(["mptcp limits set subflows 8 add_addr_accepted 8",
                                   "mptcp endpoint flush",
                                   "mptcp endpoint add 10.1.1.2 dev wlan0 id 1 subflow",
                                   "mptcp endpoint add 10.2.1.2 dev wwan0 id 2 subflow"])),
        ("ap", [*netem, "ap-c", "root", "netem", "delay", "10ms", "rate", "20mbit",
                "limit", "1017"]),
        ("ap", [*netem, "ap-s", "root", "netem", "delay", "10ms", "rate", "20mbit",
                "limit", "1017"]),
        ("cell", [*netem, "cell-c", "root", "netem", "delay", "40ms", "rate", "10mbit",
                  "limit", "1034"]),
        ("cell", [*netem, "cell-s", "root", "netem", "delay", "40ms", "rate", "10mbit",
                  "limit", "1034"]),
        *[(host, ["tcpdump", "-i", dev, "-n", "-U", "-s", "160", "-w",
                  f"{d}/{host}/{host}-{dev}.pcap", "(", "ip", "or", "ip6", ")", "and",
                  "not", "tcp", "port", "22"])
          for host, dev in [("client", "wlan0"), ("client", "wwan0"), ("server", "p1"),
                            ("server", "p2")]],
        ("server", ["python3", "-I", "-S", "-c", "mprig/run/ss_agent.py", "100000", "5201",
                    "5202"]),
        ("client", commands.capture.nstat_argv()),
        ("server", commands.capture.nstat_argv()),
        ("server", ["mptcpize", "run", "iperf3", "-s", "-1", "-J", "-B", "10.9.0.1", "-p",
                    "5201", "--logfile", f"{d}/server/iperf3-server.json"]),
        ("client", ["mptcpize", "run", "iperf3", "-c", "10.9.0.1", "-B", "10.1.1.2", "-p",
                    "5201", "-t", "5", "-O", "0", "-J", "--connect-timeout", "5000", "-R",
                    "--logfile", f"{d}/client/iperf3-client.json"]),
        ("ap", ["tc", "qdisc", "del", "dev", "ap-c", "root"]),
        ("ap", ["tc", "qdisc", "del", "dev", "ap-s", "root"]),
        ("cell", ["tc", "qdisc", "del", "dev", "cell-c", "root"]),
        ("cell", ["tc", "qdisc", "del", "dev", "cell-s", "root"]),
    ]  # fmt: skip


def test_tcp_upload_binds_its_path_and_skips_mptcpize() -> None:
    run = make_run(
        Variant(name="tcp_cell", protocol="tcp", path="cell"),
        Traffic(direction="upload", duration_s=3, omit_s=1),
    )
    c = commands.build(run, LINKS, server_addr="10.9.0.1", rig="h3")
    assert c.server == (
        "server",
        [
            "iperf3",
            "-s",
            "-1",
            "-J",
            "-B",
            "10.9.0.1",
            "-p",
            "5201",
            "--logfile",
            "/tmp/mprig-h3/r1/server/iperf3-server.json",
        ],
    )
    assert c.client == (
        "client",
        [
            "iperf3",
            "-c",
            "10.9.0.1",
            "-B",
            "10.2.1.2",
            "-p",
            "5201",
            "-t",
            "3",
            "-O",
            "1",
            "-J",
            "--connect-timeout",
            "5000",
            "--logfile",
            "/tmp/mprig-h3/r1/client/iperf3-client.json",
        ],
    )
    assert commands.sender(run) == "client"


def test_native_mptcp_flag_replaces_mptcpize() -> None:
    c = commands.build(make_run(Variant(name="m")), LINKS, iperf3_mptcp_flag=True)
    assert c.client[1][:3] == ["iperf3", "-c", commands.SERVER_ADDR_PLACEHOLDER]
    assert c.client[1][-3:] == [
        "--mptcp",
        "--logfile",
        "/tmp/mprig-virtual/r1/client/iperf3-client.json",
    ]


def test_bulk_download_server_sends() -> None:
    run = make_run(Variant(name="m"), Traffic(tool="bulk", bytes=1000))
    c = commands.build(run, LINKS, server_addr="10.9.0.1")
    script = commands.traffic.BULK_SCRIPT
    d = "/tmp/mprig-virtual/r1"
    assert c.server == (
        "server",
        [
            "python3",
            "-c",
            script,
            "listen",
            "10.9.0.1",
            "5202",
            "1000",
            "7",
            "1",
            "send",
            f"{d}/server/bulk-server.json",
        ],
    )
    assert c.client == (
        "client",
        [
            "python3",
            "-c",
            script,
            "connect",
            "10.9.0.1",
            "5202",
            "1000",
            "7",
            "1",
            "recv",
            f"{d}/client/bulk-client.json",
            "10.1.1.2",
        ],
    )


def test_wifi_distance_goes_through_the_channel_model() -> None:
    from mprig.campaign import wifi
    from mprig.run import impair

    far = Path(
        name="wifi",
        kind="wifi",
        distance_m=60,
        wifi_standard="11g",
        down=Direction(rate_mbit=54, delay_ms=1),
        up=Direction(rate_mbit=54, delay_ms=1),
    )
    run = dataclasses.replace(make_run(Variant(name="m")), paths=(far, PATHS[1]))  # fmt: skip
    setup = commands.build(run, LINKS).setup
    model = wifi.effective_path(far)
    assert ("ap", ["tc", "qdisc", "replace", "dev", "ap-c", "root", "netem",
                   *impair.netem_args(model.down)]) in setup  # fmt: skip
    assert model.down.rate_mbit != 54
