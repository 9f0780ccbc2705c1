"""`mprig run --kernel PATH` / MPRIG_VM_KERNEL: VM mode boots a chosen kernel image (the VM
lab's patched bzImage) instead of /boot's newest (no root, no VM)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mprig.cli.main import main
from mprig.errors import MprigError
from mprig.rig import vm, vmprobe

CAMPAIGN = """\
name: kern
paths:
  - {name: wifi, kind: wifi, rate_mbit: 10}
variants:
  - {name: tcp, protocol: tcp, path: wifi}
traffic: {tool: iperf3, duration_s: 1}
"""


def test_find_kernel_boots_the_image_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = tmp_path / "bzImage"
    image.write_bytes(b"\0")
    (tmp_path / "vmlinuz-6.1.0-56-amd64").touch()
    monkeypatch.setenv(vmprobe.VM_KERNEL_ENV, str(image))
    assert vmprobe.find_kernel(tmp_path) == image
    monkeypatch.setenv("MPRIG_VNG", "/usr/bin/vng")
    argv = vm._vng_argv(tmp_path, [], "true", "1G", 1, use_kvm=False)
    assert argv[1:3] == ["--run", str(image)]


def test_a_missing_image_in_the_environment_says_how_to_build_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(vmprobe.VM_KERNEL_ENV, str(tmp_path / "nope"))
    with pytest.raises(MprigError, match=r"nope does not exist .*make kernel-vm"):
        vmprobe.find_kernel(tmp_path)


def _spec(tmp_path: Path) -> Path:
    spec = tmp_path / "kern.yaml"
    spec.write_text(CAMPAIGN)
    return spec


def test_run_kernel_option_reaches_the_vm_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = tmp_path / "bzImage"
    image.write_bytes(b"\0")
    monkeypatch.delenv(vmprobe.VM_KERNEL_ENV, raising=False)
    monkeypatch.setenv("MPRIG_VNG", "/usr/bin/vng")
    booted: list[list[str]] = []

    def fake_run_in_vm(argv: list[str], rwdirs: list[Path], **_: Any) -> int:
        booted.append(vm._vng_argv(tmp_path, rwdirs, "true", "1G", 1, use_kvm=False))
        return 0

    monkeypatch.setattr(vm, "run_in_vm", fake_run_in_vm)
    args = ["run", str(_spec(tmp_path)), "--vm", "--kernel", str(image), "--quiet"]
    code = main([*args, "--results", str(tmp_path / "r")])
    os.environ.pop(vmprobe.VM_KERNEL_ENV, None)  # the command sets it for its own process
    assert (code, [a[1:3] for a in booted]) == (0, [["--run", str(image)]])


def test_run_kernel_option_with_a_missing_file_fails_before_booting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(vmprobe.VM_KERNEL_ENV, raising=False)
    monkeypatch.setattr(vm, "run_in_vm", lambda *a, **k: pytest.fail("booted"))
    args = ["run", str(_spec(tmp_path)), "--vm", "--kernel", str(tmp_path / "bz"), "--quiet"]
    code = main([*args, "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code != 0 and f"kernel image {tmp_path / 'bz'} does not exist" in err, err
    assert vmprobe.VM_KERNEL_ENV not in os.environ
