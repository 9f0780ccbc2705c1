"""The kernel role's build path, executed (issue 17 part 2, `make test-lab`).

A Debian 12 guest with a disk of its own (mprig.rig.diskvm: mmdebstrap image, Debian's stock
kernel, SSH with its host key checked) is the lab host. `ansible-playbook playbooks/kernel.yml`
with the role's build variables:

a) builds Debian packages on the controller (kernel_build_host: localhost; an emulated guest
   would take hours) from Debian's linux-source-6.1 with the upstream patch series (0002:
   net.mptcp.proactive_sched), upstream-mptcp.config and vm-disk.config onto
   `x86_64_defconfig kvm_guest.config`, with `make bindeb-pkg -j$(nproc)`;
b) copies them to the guest, installs them with apt, reboots it, and verifies the running
   release and the sysctls, patch 0002's included;
c) a second run changes nothing (the build's `creates:`, the installed packages, no reboot).

The guest's boot loader is a stand-in (diskvm: QEMU exits on reboot and the supervisor boots
the newest /boot/vmlinuz-*, as GRUB's default entry would): the test checks the stock kernel
booted first and the built one after the role's reboot. The build directory is kept under
/var/cache/mprig/kernel-role, so a rerun skips the build (about 25 minutes on 2 cores).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from mprig.rig import diskvm, provision
from mprig.rig.vmlab import parse_recap

pytestmark = [pytest.mark.long, pytest.mark.vm, pytest.mark.integration]

BUILD_DIR = Path(os.environ.get("MPRIG_KERNEL_ROLE_DIR", "/var/cache/mprig/kernel-role"))
SYSCTLS = ["net.mptcp.enabled", "net.ipv4.tcp_congestion_control", "net.mptcp.proactive_sched"]


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[diskvm.DiskVM]:
    with diskvm.DiskVM(tmp_path_factory.mktemp("diskvm")) as guest:
        yield guest


def inventory(vm: diskvm.DiskVM, dest: Path) -> Path:
    """The guest as a lab's server, its kernel built on the controller (localhost)."""
    host = {**vm.inventory_vars(), "kernel_build_enabled": True, "kernel_source": "linux-source",
            "kernel_build_host": "localhost", "kernel_build_dir": str(BUILD_DIR),
            "kernel_base_config": "x86_64_defconfig kvm_guest.config",
            "kernel_extra_fragments": ["vm-disk.config"], "kernel_localversion": "-mprig-lab",
            "kernel_required_sysctls": SYSCTLS}  # fmt: skip
    local = {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}
    tree = {"all": {"children": {"mptcp_server": {"hosts": {"labhost": host}}},
                    "hosts": {"localhost": local}}}  # fmt: skip
    path = dest / "inventory.yml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def play(vm: diskvm.DiskVM, inv: Path) -> tuple[str, float]:
    start = time.monotonic()
    out = provision.apply(inv, vm.workdir, playbook="kernel.yml", timeout=3 * 3600)
    return out, time.monotonic() - start


@pytest.fixture(scope="module")
def first(vm: diskvm.DiskVM) -> tuple[str, float]:
    stock = vm.ssh("uname -r").strip()
    assert vm.boots == [stock]
    out, seconds = play(vm, inventory(vm, vm.workdir))
    print(f"kernel.yml, first run: {seconds:.0f} s")
    return out, seconds


def test_the_role_builds_installs_and_boots_the_patched_kernel(
    vm: diskvm.DiskVM, first: tuple[str, float]
) -> None:
    out, _ = first
    recap = parse_recap(out)
    assert recap["labhost"]["failed"] == 0 and recap["labhost"]["unreachable"] == 0, recap
    built = {p.read_text().strip() for p in BUILD_DIR.glob("*/release")}
    # the stand-in boot loader booted the stock kernel, then (after the role's reboot) the built one
    assert len(vm.boots) == 2 and vm.boots[1] in built, (vm.boots, built)
    release = vm.boots[1]
    assert release.endswith("-mprig-lab"), release
    assert vm.ssh("uname -r").strip() == release
    assert vm.ssh("sysctl -n net.mptcp.proactive_sched net.mptcp.enabled").split() == ["0", "1"]
    status = vm.ssh(f"dpkg-query -W -f='${{Status}}' linux-image-{release}")
    assert status == "install ok installed", status


def test_a_second_run_changes_nothing(vm: diskvm.DiskVM, first: tuple[str, float]) -> None:
    out, seconds = play(vm, inventory(vm, vm.workdir))
    print(f"kernel.yml, second run: {seconds:.0f} s")
    recap = parse_recap(out)
    assert (recap["labhost"]["failed"], recap["labhost"]["changed"]) == (0, 0), recap
    assert len(vm.boots) == 2, vm.boots  # no reboot
