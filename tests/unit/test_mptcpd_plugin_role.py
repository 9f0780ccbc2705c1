"""playbooks/roles/mptcpd_plugin applied for real on localhost, building into a temporary
directory (no apt: `make setup` installed mptcpd and the build dependencies): the plugin is
an ELF shared object exporting mptcpd's plugin descriptor, a second run changes nothing,
and a changed source is built again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SOURCE = REPO / "kernel-configs" / "mptcpd" / "mprig_fullmesh.c"
PLAY = "- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: mptcpd_plugin\n"

pytestmark = pytest.mark.slow


def play(tmp: Path, source: Path = SOURCE) -> subprocess.CompletedProcess[str]:
    (tmp / "play.yml").write_text(PLAY)
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_CONFIG": str(REPO / "playbooks" / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "playbooks" / "roles"),
        "ANSIBLE_HOME": str(tmp / "ansible"),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    argv = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            str(tmp / "play.yml"), "-e", "mptcpd_plugin_manage_packages=false",
            "-e", f"mptcpd_plugin_dir={tmp / 'plugins'}",
            "-e", f"mptcpd_plugin_source={source}"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def changed(done: subprocess.CompletedProcess[str]) -> int:
    line = next(x for x in done.stdout.splitlines() if x.startswith("localhost "))
    return int(line.split("changed=")[1].split()[0])


def test_builds_a_loadable_plugin_once_and_again_when_the_source_changes(tmp_path: Path) -> None:
    first = play(tmp_path)
    plugin = tmp_path / "plugins" / "mprig_fullmesh.so"
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(plugin)], capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
    assert (plugin.read_bytes()[:4], "_mptcpd_plugin" in symbols) == (b"\x7fELF", True)
    assert not (tmp_path / "plugins" / "mprig_fullmesh.so.tmp").exists()
    assert changed(first) >= 3 and changed(play(tmp_path)) == 0  # idempotent
    edited = tmp_path / "edited.c"
    edited.write_text(SOURCE.read_text() + "\n/* edited */\n")
    before = plugin.stat().st_mtime_ns
    assert changed(play(tmp_path, edited)) == 3  # copied, compiled, renamed
    assert plugin.stat().st_mtime_ns > before
