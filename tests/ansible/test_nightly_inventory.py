"""playbooks/nightly.yml takes its settings from the inventory: they are role defaults
(roles/nightly), which group_vars override; they used to be play vars, which override the
inventory, so a lab's nightly_keep or nightly_on_calendar in group_vars was ignored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


def test_group_vars_set_the_nightly(tmp_path: Path) -> None:
    inv = tmp_path / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    settings = {
        "nightly_state_dir": str(tmp_path / "state"),
        "nightly_unit_dir": str(tmp_path / "units"),
        "nightly_manage_systemd": False,
        "nightly_keep": 30,
        "nightly_on_calendar": "*-*-* 04:15:00",
        "nightly_campaign": "experiments/smoke.yaml",
    }
    (inv / "group_vars" / "all.yml").write_text(yaml.safe_dump(settings))
    (tmp_path / "units").mkdir()
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_CONFIG": str(REPO / "playbooks" / "ansible.cfg"),
        "ANSIBLE_HOME": str(tmp_path / "ansible"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    argv = [str(BIN / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks" / "nightly.yml"),
            "-e", "nightly_become=false"]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    service = (tmp_path / "units" / "mprig-nightly.service").read_text()
    timer = (tmp_path / "units" / "mprig-nightly.timer").read_text()
    assert ("--keep 30" in service, "experiments/smoke.yaml" in service) == (True, True)
    assert [ln for ln in timer.splitlines() if ln.startswith("OnCalendar=")] == [
        "OnCalendar=*-*-* 04:15:00"
    ]
