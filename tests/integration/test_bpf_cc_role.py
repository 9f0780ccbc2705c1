"""playbooks/roles/bpf_cc on this machine (connection local): it builds and registers a
program, and a second run changes nothing. The toolchain packages are already installed
here, so the apt task is switched off."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mprig.stack import bpfcc

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (BPF)")


def converge(tmp_path: Path, build: Path) -> str:
    play = tmp_path / "play.yml"
    play.write_text(
        "- name: BPF congestion control\n"
        "  hosts: localhost\n"
        "  connection: local\n"
        "  roles:\n"
        "    - role: bpf_cc\n"
        "      vars:\n"
        "        bpf_cc_programs: [prr]\n"
        "        bpf_cc_manage_packages: false\n"
        f"        bpf_cc_source_dir: {REPO / 'kernel-configs' / 'bpf'}\n"
        f"        bpf_cc_build_dir: {build}\n"
    )
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin",
        "ANSIBLE_CONFIG": str(REPO / "playbooks" / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "playbooks" / "roles"),
        "ANSIBLE_HOME": str(tmp_path / "ansible"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", str(play)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def recap(out: str) -> dict[str, int]:
    line = next(ln for ln in out.splitlines() if ln.startswith("localhost "))
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def test_role_registers_prr_and_is_idempotent(tmp_path: Path) -> None:
    if "prr" in bpfcc.loaded():
        pytest.skip("prr is registered already (by a campaign?): not touching it")
    build = tmp_path / "build"
    try:
        first = recap(converge(tmp_path, build))
        assert "prr" in bpfcc.loaded()
        second = recap(converge(tmp_path, build))
    finally:
        bpfcc.unload(["prr"])
    release = os.uname().release
    assert sorted(p.name for p in (build / release).iterdir()) == ["prr.o", "vmlinux.h"]
    # created dir, copied sources, vmlinux.h, compiled, registered; then nothing
    assert (first["changed"], first["failed"]) == (5, 0)
    assert (second["changed"], second["failed"]) == (0, 0)
