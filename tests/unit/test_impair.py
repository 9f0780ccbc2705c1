"""tc netem command builder: both directions per path, a limit that covers the delay line."""

from __future__ import annotations

from mprig import impair
from mprig.rig.host import PathLink
from mprig.spec import Direction, Path

LINK = PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "ap-c", "ap-s")


def test_netem_args_full() -> None:
    d = Direction(rate_mbit=20, delay_ms=10, jitter_ms=2.5, loss_pct=0.1, limit_pkts=100)
    # in flight: 20e6 * 0.0125 / (1514 * 8) = 20.6 -> 21 packets on top of the queue
    assert impair.netem_args(d) == [
        "delay", "10ms", "2.5ms", "loss", "0.1%", "rate", "20mbit", "limit", "121",
    ]  # fmt: skip


def test_netem_args_reorder_after_loss() -> None:
    d = Direction(rate_mbit=10, delay_ms=20, loss_pct=1, reorder_pct=5, limit_pkts=100)
    assert impair.netem_args(d) == [
        "delay", "20ms", "loss", "1%", "reorder", "5%", "rate", "10mbit", "limit", "117",
    ]  # fmt: skip


def test_netem_args_minimal() -> None:
    d = Direction(rate_mbit=0.5)
    assert impair.netem_args(d) == ["delay", "0ms", "rate", "0.5mbit", "limit", "1000"]


def test_limit_grows_with_rate_times_delay() -> None:
    d = Direction(rate_mbit=1000, delay_ms=100, limit_pkts=1000)
    assert impair.netem_limit(d) == 1000 + 8257


def test_apply_commands_both_directions() -> None:
    path = Path(
        name="wifi",
        kind="wifi",
        down=Direction(rate_mbit=20, delay_ms=10),
        up=Direction(rate_mbit=5, delay_ms=10, loss_pct=1),
    )
    assert impair.apply_commands(path, LINK) == [
        ("ap", ["tc", "qdisc", "replace", "dev", "ap-c", "root", "netem",
                "delay", "10ms", "rate", "20mbit", "limit", "1017"]),
        ("ap", ["tc", "qdisc", "replace", "dev", "ap-s", "root", "netem",
                "delay", "10ms", "loss", "1%", "rate", "5mbit", "limit", "1005"]),
    ]  # fmt: skip


def test_clear_commands() -> None:
    assert impair.clear_commands(LINK) == [
        ("ap", ["tc", "qdisc", "del", "dev", "ap-c", "root"]),
        ("ap", ["tc", "qdisc", "del", "dev", "ap-s", "root"]),
    ]


def test_a_hosts_consecutive_tc_commands_become_one_tc_batch() -> None:
    """Under VM emulation each tc started costs 0.2-0.4 s, so a router's qdisc commands of
    one stage go through one `tc -batch`; order is kept and nothing else is merged."""
    cmds = [
        ("client", ["sysctl", "-w", "a=1"]),
        *impair.clear_commands(LINK),
        ("cell", ["tc", "qdisc", "del", "dev", "cell-c", "root"]),
        ("ap", ["ip", "link", "show"]),
        ("ap", ["tc", "qdisc", "replace", "dev", "ap-c", "root", "netem", "delay", "1ms"]),
    ]
    fused = impair.fuse_tc(cmds)
    assert fused == [
        ("client", ["sysctl", "-w", "a=1"]),
        ("ap", impair.tc_batch(["qdisc del dev ap-c root", "qdisc del dev ap-s root"])),
        ("cell", ["tc", "qdisc", "del", "dev", "cell-c", "root"]),  # alone: left as it is
        ("ap", ["ip", "link", "show"]),
        ("ap", ["tc", "qdisc", "replace", "dev", "ap-c", "root", "netem", "delay", "1ms"]),
    ]


def test_a_tc_batch_runs_every_line_and_fails_if_one_failed() -> None:
    """The real tc: a line that fails does not stop the lines after it (teardown removes
    every qdisc it can), and the batch's status says something failed."""
    import subprocess

    argv = impair.tc_batch(
        ["qdisc del dev mprig-no-such-a root", "qdisc del dev mprig-no-such-b root"]
    )
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert p.returncode != 0
    assert "mprig-no-such-a" in p.stderr and "mprig-no-such-b" in p.stderr
