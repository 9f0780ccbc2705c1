"""Pure parts of the VM lab (mprig/rig/vmlab.py): the play recap and the lab's group_vars."""

from __future__ import annotations

from mprig.rig.host import PathLink, Rig
from mprig.rig.vmlab import lab_vars, parse_recap

RECAP = """\
TASK [mptcp : Set the endpoints] ***********************************************
ok: [client]

PLAY RECAP *********************************************************************
ap                         : ok=31   changed=9    unreachable=0    failed=0    skipped=12   rescued=0    ignored=0
cell                       : ok=20   changed=5    unreachable=0    failed=0    skipped=9    rescued=0    ignored=0
client                     : ok=40   changed=14   unreachable=1    failed=2    skipped=7    rescued=0    ignored=0
"""  # noqa: E501  (ansible-playbook's recap lines, verbatim)


def test_parse_recap_reads_every_hosts_counts() -> None:
    recap = parse_recap(RECAP)
    assert sorted(recap) == ["ap", "cell", "client"]
    assert (recap["client"]["failed"], recap["client"]["unreachable"]) == (2, 1)
    assert recap["ap"] == {"ok": 31, "changed": 9, "unreachable": 0, "failed": 0,
                           "skipped": 12, "rescued": 0, "ignored": 0}  # fmt: skip
    assert parse_recap("ERROR! no play ran") == {}


def test_lab_vars_put_the_txpower_driver_on_the_aps_radio() -> None:
    wifi = PathLink("wifi", "wifi", "wlan0", "10.1.1.2", "ap", "lan0", "lan1")
    cell = PathLink("cell", "cellular", "wwan0", "10.2.1.2", "cell", "lan0", "lan1")
    rig = Rig("lab", {}, (wifi, cell), "10.0.0.1", "virtual-vm")
    got = lab_vars(rig, "6.1.192-mprig-vm", ("net.mptcp.proactive_sched",))
    assert got == {
        "kernel_expected_release": "6.1.192-mprig-vm",
        "kernel_required_sysctls": ["net.mptcp.proactive_sched"],
        "mprig_attenuators": {
            "wifi": {
                "driver": "txpower",
                "host": "ap",
                "interface": "lan0",
                "max_dbm": 20,
                "physical_m": 1.0,
            }
        },
    }


def test_a_lab_without_wifi_gets_no_attenuator() -> None:
    """Paper 002's four wired paths: a lab of routers, nothing to attenuate."""
    paths = tuple(
        PathLink(f"p{i}", "wired", f"eth{i}", f"10.{i}.1.2", f"r{i}", "lan0", "lan1")
        for i in range(1, 5)
    )
    rig = Rig("lab", {}, paths, "10.0.0.1", "virtual-vm")
    got = lab_vars(rig, "", ("net.mptcp.enabled",))
    assert got == {
        "kernel_expected_release": "",
        "kernel_required_sysctls": ["net.mptcp.enabled"],
        "mprig_attenuators": {},
    }
