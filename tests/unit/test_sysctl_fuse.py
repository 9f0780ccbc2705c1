"""sysctl writes without a program started (knobs.fuse_sysctl), a router's settings from
the run's qdisc snapshot (isolation.from_qdiscs), and failures shown as the commands a
fused command stands for."""

from __future__ import annotations

import pytest

from mprig.rig.batch import Cmd, Done
from mprig.run import run_attempt
from mprig.stack import isolation, knobs

SACK = ["sysctl", "-q", "-w", "net.ipv4.tcp_sack=0", "net.ipv4.tcp_rmem=4096 131072 1000000"]
MPTCP = ["sysctl", "-q", "-w", "net.mptcp.enabled=1"]


def test_consecutive_sysctl_writes_become_one_builtin_script() -> None:
    mkdir, ip = Cmd(["mkdir", "/x"]), Cmd(["ip", "mptcp", "limits", "show"])
    out = knobs.fuse_sysctl([mkdir, Cmd(SACK), Cmd(MPTCP), ip, Cmd(MPTCP, check=False)])
    assert [c.argv[0] for c in out] == ["mkdir", "bash", "ip", "bash"]
    fused = out[1]
    assert fused.argv == ["bash", "-c", knobs.SYSCTL_W, "mprig-sysctl", *SACK[3:], *MPTCP[3:]]
    assert fused.parts == (tuple(SACK), tuple(MPTCP)) and fused.check is True
    assert out[3].parts == (tuple(MPTCP),) and out[3].check is False


@pytest.mark.parametrize(
    "cmd",
    [
        Cmd(["sysctl", "net.ipv4.tcp_sack"]),  # a read prints: not a write
        Cmd(["sysctl", "-w", "net.ipv4.tcp_sack=1"]),  # not quiet: prints what it set
        Cmd(MPTCP, log="/x.log"),  # background
        Cmd(MPTCP, enforce_timeout=True),
        Cmd(["sysctl", "-q", "-w", "-p"]),  # an option, not an assignment
    ],
)
def test_other_sysctl_commands_are_left_as_they_are(cmd: Cmd) -> None:
    assert knobs.fuse_sysctl([cmd]) == [cmd]


SNAPSHOT = """\
qdisc noqueue 0: dev lo root refcnt 2
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
qdisc netem 8001: dev ap-c root refcnt 2 limit 1000 delay 10ms rate 20Mbit
 Sent 120 bytes 2 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc fq_codel 0: dev ap-s root refcnt 2 limit 10240p flows 1024
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
qdisc pfifo 10: dev ap-c parent 8001:1 limit 1000p
"""


def test_a_routers_settings_come_from_its_snapshot() -> None:
    got = isolation.from_qdiscs(SNAPSHOT, ["ap-c", "ap-s", "ap-x"])
    assert got.devices == {"ap-c": {"qdisc": "netem"}, "ap-s": {"qdisc": "fq_codel"}, "ap-x": {}}
    assert got.sysctls == {} and got.endpoints == ()


def test_a_fused_commands_failure_names_the_commands_it_stands_for() -> None:
    fused = knobs.fuse_sysctl([Cmd(MPTCP)])[0]
    done = Done("client", fused, 1, "", "sysctl: cannot set net.mptcp.enabled", 0.01)
    with pytest.raises(run_attempt.RunFailed) as e:
        run_attempt.raise_first_failure({"client": [done]})
    assert str(e.value) == (
        "client: `sysctl -q -w net.mptcp.enabled=1` exited 1: sysctl: cannot set net.mptcp.enabled"
    )


IP_SET = ["ip", "mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8"]


def test_an_mptcp_set_up_command_also_shows_what_it_set() -> None:
    shows = knobs.set_and_show(IP_SET)
    assert shows == knobs.ip_batch(["mptcp limits set subflows 8 add_addr_accepted 8",
                                    *knobs.MPTCP_SHOW])  # fmt: skip
    batch = knobs.ip_batch(["mptcp endpoint flush", "mptcp endpoint add 10.1.1.2 dev wlan0"])
    assert knobs.set_and_show(batch) == knobs.ip_batch([*batch[4:], *knobs.MPTCP_SHOW])


@pytest.mark.parametrize(
    "argv",
    [
        ["ip", "link", "set", "wlan0", "up"],
        knobs.ip_batch(["mptcp endpoint flush", "link set wlan0 up"]),  # not only MPTCP
        ["sysctl", "-q", "-w", "net.mptcp.enabled=1"],
        ["bash", "-c", "ip mptcp limits set subflows 8"],  # not mprig's ip_batch
    ],
)
def test_other_commands_are_not_turned_into_a_read(argv: list[str]) -> None:
    assert knobs.set_and_show(argv) is None


# as ip prints them: endpoint lines end in a space
SHOWN = (
    "add_addr_accepted 8 subflows 8\n"
    "10.2.1.2 id 2 subflow dev wwan0 \n"
    "10.1.1.2 id 1 subflow dev wlan0 \n"
)


def test_the_shown_limits_and_endpoints_read_as_the_read_back_reads_them() -> None:
    read = isolation.parse("@@sysctl\nnet.ipv4.tcp_sack = 1\n@@limits\n@@endpoints\n")
    got = isolation.with_mptcp(read, SHOWN)
    lines = SHOWN.splitlines()
    script = f"@@sysctl\nnet.ipv4.tcp_sack = 1\n@@limits\n{lines[0]}\n@@endpoints\n"
    assert got == isolation.parse(script + "\n".join(lines[1:]))  # what READ_SCRIPT prints
    assert got.mptcp_limits == {"add_addr_accepted": "8", "subflows": "8"}
    assert got.endpoints == ("10.1.1.2 id 1 subflow dev wlan0", "10.2.1.2 id 2 subflow dev wwan0")
    assert got.sysctls == {"net.ipv4.tcp_sack": "1"}
    assert isolation.with_mptcp(read, "").endpoints == ()
