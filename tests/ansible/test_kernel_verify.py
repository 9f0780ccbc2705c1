"""The kernel role's verify mode on this machine (connection local, nothing changed): with
kernel_expected_release set it reads the running release itself (ansible.cfg gathers no
facts, so it once failed with "'dict object' has no attribute 'kernel'"), and it names a
wrong release and a missing sysctl. The VM lab (tests/integration/test_lab_vm.py) runs the
same role over SSH against the patched kernel."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml
from test_playbooks import BIN, PLAYBOOKS, ansible_env

PLAY = """\
- name: Verify this machine's kernel
  hosts: localhost
  connection: local
  roles:
    - role: kernel
"""


def verify(tmp_path: Path, **extra: object) -> subprocess.CompletedProcess[str]:
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    env = {**ansible_env(tmp_path), "ANSIBLE_ROLES_PATH": str(PLAYBOOKS / "roles")}
    argv = [str(BIN / "ansible-playbook"), "-i", "localhost,", str(play), "-e", json.dumps(extra)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def test_the_running_release_and_sysctls_pass(tmp_path: Path) -> None:
    done = verify(tmp_path, kernel_expected_release=os.uname().release,
                  kernel_required_sysctls=["net.ipv4.tcp_congestion_control"])  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    assert "failed=0" in done.stdout


def test_another_release_fails_naming_both(tmp_path: Path) -> None:
    done = verify(tmp_path, kernel_expected_release="6.1.192-mprig-vm")
    assert done.returncode != 0
    assert f"runs {os.uname().release}, expected 6.1.192-mprig-vm" in done.stdout, done.stdout


def test_a_missing_sysctl_is_named(tmp_path: Path) -> None:
    done = verify(tmp_path, kernel_required_sysctls=["net.mptcp.no_such_knob"])
    assert done.returncode != 0
    assert "lacks sysctl net.mptcp.no_such_knob" in done.stdout, done.stdout


def test_kernel_source_takes_git_or_debians_linux_source(tmp_path: Path) -> None:
    done = verify(tmp_path, kernel_source="svn")
    assert done.returncode != 0
    assert "kernel_source" in done.stdout and "git, linux-source" in done.stdout, done.stdout
    assert verify(tmp_path, kernel_source="linux-source").returncode == 0  # verify mode only


def test_the_build_takes_debians_tarball_when_kernel_source_is_linux_source() -> None:
    tasks = yaml.safe_load((PLAYBOOKS / "roles" / "kernel" / "tasks" / "build.yml").read_text())
    by_name = {t["name"]: t for t in tasks}
    extract = by_name["Extract Debian's kernel source"]
    assert (extract["when"], extract["ansible.builtin.unarchive"]["src"]) == (
        "kernel_source == 'linux-source'",
        "/usr/src/linux-source-{{ kernel_linux_source_version }}.tar.xz",
    )
    assert by_name["Check out {{ kernel_git_ref }}"]["when"] == "kernel_source == 'git'"
    link = by_name["Name the extracted tree linux (where the build script looks)"]
    assert link["ansible.builtin.file"]["dest"].endswith("/linux")  # mprig-build-kernel's tree
