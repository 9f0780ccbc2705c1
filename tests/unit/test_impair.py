"""tc netem command builder: both directions per path, a limit that covers the delay line."""

from __future__ import annotations

import shlex

from mprig.campaign.spec import Direction, Path
from mprig.rig.batch import Cmd
from mprig.rig.host import PathLink
from mprig.run import impair

LINK = PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "ap-c", "ap-s")
PATH = Path(name="wifi", kind="wifi", down=Direction(rate_mbit=20, delay_ms=10),
            up=Direction(rate_mbit=5, delay_ms=10))  # fmt: skip


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
    """Under VM emulation each tc started costs 0.2-0.4 s, so a router's tc commands of one
    stage go through one `tc -batch`, the before/after snapshot included; order is kept, a
    part's output is found by its own argv, and at most one part prints."""
    show = Cmd(impair.snapshot_argv())
    replace = [Cmd(argv) for _, argv in impair.apply_commands(PATH, LINK)]
    dels = [Cmd(argv, check=False) for _, argv in impair.clear_commands(LINK)]
    mkdir, read = Cmd(["mkdir", "/x"]), Cmd(["bash", "-c", "tc qdisc show"])
    setup = impair.fuse_tc([mkdir, *replace, show, read])
    assert setup[0] == mkdir and setup[2] == read and len(setup) == 3
    lines = [shlex.join(c.argv[1:]) for c in replace] + ["qdisc show"]
    assert setup[1].argv == impair.tc_batch(lines, stats=True)
    assert setup[1].parts == (*(tuple(c.argv) for c in replace), tuple(show.argv))
    assert setup[1].check is True
    stop = impair.fuse_tc([show, *dels])
    assert [c.argv for c in stop] == [
        impair.tc_batch(["qdisc show", "qdisc del dev ap-c root", "qdisc del dev ap-s root"],
                        stats=True)
    ]  # fmt: skip
    assert stop[0].check is False  # the dels' failures stay ignored
    assert impair.fuse_tc([show, show]) == [show, show]  # two outputs: not fused
    assert impair.fuse_tc([dels[0]]) == [dels[0]]  # alone: left as it is
    bg = Cmd(["tc", "monitor"], log="/x.log")
    assert impair.fuse_tc([bg, dels[0]]) == [bg, dels[0]]


def test_a_tc_batch_runs_every_line_and_fails_if_one_failed() -> None:
    """The real tc: a line that fails does not stop the lines after it (teardown removes
    every qdisc it can), the batch's status says something failed, and with stats the
    `qdisc show` line prints what `tc -s qdisc show` prints."""
    import subprocess

    lines = ["qdisc show dev lo", "qdisc del dev mprig-no-such-a root",
             "qdisc del dev mprig-no-such-b root"]  # fmt: skip
    p = subprocess.run(
        impair.tc_batch(lines, stats=True), capture_output=True, text=True, timeout=30
    )
    assert p.returncode != 0
    assert "mprig-no-such-a" in p.stderr and "mprig-no-such-b" in p.stderr
    alone = subprocess.run(["tc", "-s", "qdisc", "show", "dev", "lo"], capture_output=True,
                           text=True, timeout=30, check=True)  # fmt: skip
    assert p.stdout.split("Sent")[0] == alone.stdout.split("Sent")[0]
    assert " Sent " in p.stdout
