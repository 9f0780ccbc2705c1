"""A KVM guest that never boots, with the real vng and the real QEMU (issue 13).

A wrapper named qemu-system-x86_64, first on PATH, stands in for the hosts where QEMU with
KVM stays up while the guest never reaches userspace: asked for KVM it sleeps, otherwise
it runs the real QEMU. run_in_vm must give the KVM boot its deadline, stop it, record
"not usable" and boot the same command again with software emulation (one real boot).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from mprig.rig import kvm, vm

pytestmark = [pytest.mark.vm, pytest.mark.slow]

WRAPPER = """#!/bin/sh
case "$*" in
  *accel=kvm*|*-enable-kvm*) echo kvm >> "{log}"; exec sleep 3600 ;;
  *--version*) exec {qemu} "$@" ;;
  *) echo tcg >> "{log}"; exec {qemu} "$@" ;;
esac
"""


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="needs /dev/kvm")
def test_a_hanging_kvm_boot_falls_back_to_a_real_emulated_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    qemu = shutil.which("qemu-system-x86_64")
    assert qemu is not None
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "qemu-system-x86_64"
    wrapper.write_text(WRAPPER.format(log=tmp_path / "qemu.log", qemu=qemu))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("MPRIG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MPRIG_VM_KVM_BOOT_TIMEOUT", "15")
    monkeypatch.delenv(kvm.KVM_ENV, raising=False)

    guest = "echo guest says $(hostname); echo guest err >&2"
    assert vm.run_in_vm(["sh", "-c", guest], []) == 0

    assert (tmp_path / "qemu.log").read_text().split() == ["kvm", "tcg"]
    cached = json.loads((tmp_path / "cache" / "kvm.json").read_text())
    assert cached["usable"] is False
    assert "did not reach userspace within 15 s" in cached["reason"]
    out, err = capfd.readouterr()
    assert out.splitlines() == ["guest says mprig-vm"]
    assert "booting again with software emulation" in err
    assert "guest err" in err.splitlines() and "@@mprig-guest-up" not in out + err
