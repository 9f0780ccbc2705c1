"""Pure parts of VM mode, doctor and the rig commands (no root, no VM, no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig.cli import doctor
from mprig.cli.cmd_rig import render_status
from mprig.errors import MprigError, ToolMissing
from mprig.rig import vm, vmprobe
from mprig.rig.ssh import SshHost


def test_find_kernel_takes_the_newest_version(tmp_path: Path) -> None:
    for name in ("vmlinuz-5.10.0-9-amd64", "vmlinuz-6.1.0-56-amd64", "vmlinuz-6.1.0-9-amd64"):
        (tmp_path / name).touch()
    assert vmprobe.find_kernel(tmp_path) == tmp_path / "vmlinuz-6.1.0-56-amd64"


def test_find_kernel_without_images_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(ToolMissing, match="apt-get install linux-image-amd64"):
        vmprobe.find_kernel(tmp_path)


def test_choose_mode_honours_no_vm_and_the_vm_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    assert vmprobe.choose_mode("native") == ("native", "--no-vm given")
    monkeypatch.setenv(vmprobe.IN_VM_ENV, "1")
    mode, why = vmprobe.choose_mode("vm")
    assert (mode, why.startswith("inside the campaign VM")) == ("native", True)
    monkeypatch.delenv(vmprobe.IN_VM_ENV)
    with pytest.raises(MprigError, match="rig mode must be auto, native or vm"):
        vmprobe.choose_mode("fast")


def test_guest_script_sets_the_environment_then_records_the_status() -> None:
    share = Path("/var/tmp/x")
    script = vm._guest_script(["mprig", "run", "a b.yaml"], share / "status", share)
    lines = script.splitlines()
    # readiness comes first, on each of the two pipes
    assert lines[:3] == ["#!/bin/sh", "echo @@mprig-guest-up", "echo @@mprig-guest-up >&2"]
    assert "export MPRIG_IN_VM=1" in lines
    assert "export HOME=/tmp" in lines
    assert lines[-4:] == [
        "mprig run 'a b.yaml'",
        "mprig_status=$?",
        'kill "$mprig_heartbeat" 2>/dev/null',
        'echo "$mprig_status" > /var/tmp/x/status',
    ]


def test_boot_lock_nests_instead_of_deadlocking(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    lock.touch()
    assert vm._lock_held_by_ancestor(lock) is False
    with vm.boot_lock(lock), vm.boot_lock(lock):  # `flock LOCK mprig ...` is the same case
        assert vm._lock_held_by_ancestor(lock) is True


def test_doctor_render_and_missing_required() -> None:
    report = {
        "kernel_release": "6.18.0",
        "kernel": [
            {"name": "MPTCP", "ok": True, "detail": "net.mptcp.enabled = 1", "required": True},
            {"name": "sch_netem", "ok": False, "detail": "missing", "required": False},
        ],
        "tools": [
            {"name": "tc", "ok": False, "detail": "missing: install iproute2", "required": True}
        ],
        "vm": [],
        "rig_mode": "vm",
        "rig_mode_reason": "sch_netem is missing",
    }
    assert doctor.render(report).splitlines() == [
        "kernel 6.18.0",
        "kernel:",
        "  ok      MPTCP                net.mptcp.enabled = 1",
        "  no      sch_netem            missing",
        "tools:",
        "  MISSING tc                   missing: install iproute2",
        "vm:",
        "rig mode: vm because sch_netem is missing",
    ]
    assert doctor.missing_required(report) == ["tc"]


def test_doctor_renders_the_lab_hosts_section_when_an_inventory_was_given() -> None:
    report = {
        "kernel_release": "6.18.0",
        "kernel": [],
        "tools": [],
        "vm": [],
        "hosts": [
            {"name": "server: cc prr", "ok": True, "detail": "registered", "required": False}
        ],
        "rig_mode": "native",
        "rig_mode_reason": "netem present",
    }
    assert doctor.render(report).splitlines()[4:6] == [
        "hosts:",
        "  ok      server: cc prr       registered",
    ]


def test_doctor_says_where_the_playbooks_and_example_campaigns_are() -> None:
    report = {
        "kernel_release": "6.18.0",
        "kernel": [],
        "tools": [],
        "vm": [],
        "rig_mode": "native",
        "rig_mode_reason": "netem present",
        "project_files": "/opt/mprig (checkout)",
    }
    assert doctor.render(report).splitlines()[-1] == (
        "playbooks, inventory, kernel-configs, experiments: /opt/mprig (checkout)"
    )


def test_bpf_program_status_on_a_lab_host_says_what_it_lacks() -> None:
    from mprig.stack.lab_cc import program_status

    have = {"btf", "clang", "bpftool", "libbpf-dev"}
    assert program_status("prr", ("reno", "prr"), set()) == (True, "registered")
    assert program_status("lia", ("reno",), have) == (
        False, "not registered: run site.yml with bpf_cc_programs naming it",
    )  # fmt: skip
    assert program_status("lia", ("reno",), {"btf", "bpftool"}) == (
        False, "not registered; clang libbpf-dev missing (the bpf_cc role installs them)",
    )  # fmt: skip
    assert program_status("lia", ("reno",), have - {"btf"})[1].startswith("kernel has no BTF")


def test_first_version_line_skips_banners() -> None:
    assert doctor.first_version_line("\nTShark (Wireshark) 4.0.17\nCopyright\n") == (
        "TShark (Wireshark) 4.0.17"
    )
    assert doctor.first_version_line("") == "present"


def test_render_status_of_a_rig_that_is_down() -> None:
    st = {"rig": "h2", "up": False, "mode": "virtual-native", "state_dir": "/run/mprig/h2"}
    assert render_status({**st, "paths": [], "hosts": {}}) == (
        "rig h2: down (virtual-native), state /run/mprig/h2"
    )


def test_ssh_argv_runs_inside_the_controller_namespace() -> None:
    host = SshHost("client", "client", Path("/run/mprig/h2/ssh_config"), "mprig-h2-ctl")
    assert host.ssh_argv("uname -r") == [
        "ip", "netns", "exec", "mprig-h2-ctl",
        "ssh", "-F", "/run/mprig/h2/ssh_config", "client", "--", "uname -r",
    ]  # fmt: skip


def test_a_run_records_how_its_vm_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run.json `acceleration`: seen from inside the guest, KVM's paravirtual clock is
    offered only under KVM (the clock sources of a real KVM and a real emulated guest)."""
    from mprig.rig import vmprobe

    kvm_guest, tcg_guest = tmp_path / "kvm", tmp_path / "tcg"
    kvm_guest.write_text("kvm-clock tsc hpet acpi_pm \n")
    tcg_guest.write_text("tsc hpet acpi_pm \n")
    monkeypatch.delenv(vmprobe.IN_VM_ENV, raising=False)
    assert vmprobe.acceleration(kvm_guest) == "native"
    monkeypatch.setenv(vmprobe.IN_VM_ENV, "1")
    assert vmprobe.acceleration(kvm_guest) == "kvm"
    assert vmprobe.acceleration(tcg_guest) == "software emulation"
    assert vmprobe.acceleration(tmp_path / "gone") == "unrecorded"
