"""VM mode: one virtme-ng boot for the whole module (software emulation here: ~1 min).

Proves that run_in_vm boots the stock kernel with the shared filesystem and the documented
environment, that exit statuses come back, and that sch_netem exists inside."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mprig.rig import vmprobe, vmsession

pytestmark = [pytest.mark.vm, pytest.mark.slow]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[vmsession.VmSession, Path]]:
    shared = tmp_path_factory.mktemp("vmshared")
    with vmsession.VmSession(rwdirs=[shared], exit_with=7) as s:
        yield s, shared
    # the agent's exit status travelled back through run_in_vm's status file
    assert s.exit_status == 7


def run(session: tuple[vmsession.VmSession, Path], *argv: str) -> vmsession.VmResult:
    return session[0].run(list(argv), timeout=120)


def test_guest_boots_the_stock_kernel_with_netem(session: tuple[vmsession.VmSession, Path]) -> None:
    code = "from mprig.rig import vmprobe; import os; "
    code += "print(vmprobe.netem_available(), vmprobe.in_vm(), os.uname().release)"
    r = run(session, sys.executable, "-c", code)
    assert (r.returncode, r.stdout.split()) == (
        0,
        ["True", "True", vmprobe.find_kernel().name.removeprefix("vmlinuz-")],
    )


def test_guest_environment_is_the_documented_one(session: tuple[vmsession.VmSession, Path]) -> None:
    r = run(
        session,
        "sh",
        "-c",
        'hostname; pwd; echo "$PATH" | cut -d: -f1; echo "$HOME"; '
        "touch /tmp/x /run/x && echo writable",
    )
    venv_bin = str(Path(sys.executable).parent)
    assert r.stdout.splitlines() == ["mprig-vm", os.getcwd(), venv_bin, "/tmp", "writable"]


def test_exit_status_and_stderr_come_back(session: tuple[vmsession.VmSession, Path]) -> None:
    r = run(session, "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")


def test_rwdir_is_shared_both_ways(session: tuple[vmsession.VmSession, Path]) -> None:
    shared = session[1]
    (shared / "from-host").write_text("hello")
    r = run(session, "sh", "-c", f"cat {shared}/from-host; echo back > {shared}/from-guest")
    assert (r.stdout, (shared / "from-guest").read_text()) == ("hello", "back\n")


def test_netem_qdisc_works_inside(session: tuple[vmsession.VmSession, Path]) -> None:
    script = (
        "ip netns add h2vm && ip -n h2vm link add name a type veth peer name b && "
        "tc -n h2vm qdisc add dev a root netem delay 10ms rate 10mbit limit 100 && "
        "tc -n h2vm qdisc show dev a; ip netns delete h2vm"
    )
    r = run(session, "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    fields = r.stdout.split()
    assert (fields[0], fields[1], fields[3]) == ("qdisc", "netem", "root")
    assert "delay 10ms rate 10Mbit" in r.stdout


RIG_IN_VM = """
from mprig.rig import virtual
from mprig.campaign.spec import Direction, Path
d = Direction(rate_mbit=10)
paths = [
    Path(name="wifi", kind="wifi", down=d, up=d),
    Path(name="cell", kind="cellular", down=d, up=d),
]
rig = virtual.up("h2vm", paths, provision_hosts=False)  # as `mprig run` does in the VM
client = rig.hosts["client"]
print(rig.mode, client.run(["ip", "-4", "-br", "addr", "show", "dev", "wwan0"]).stdout.split()[1:])
client.run(["tc", "qdisc", "add", "dev", "wlan0", "root", "netem", "delay", "5ms"])
virtual.down("h2vm")
print(virtual.leftovers("h2vm"))
"""


def test_virtual_rig_with_ssh_works_inside_the_vm(
    session: tuple[vmsession.VmSession, Path],
) -> None:
    r = session[0].run([sys.executable, "-c", RIG_IN_VM], timeout=300)
    expected = ["virtual-vm ['UP', '10.2.1.2/24']", "[]"]
    assert (r.returncode, r.stdout.splitlines()) == (0, expected), r.stderr
