"""playbooks/nightly.yml applied for real on localhost, with the units written into a
temporary directory and systemd left alone: rendered units, systemd-analyze verification,
idempotence, and a bad calendar refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


def play(tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_CONFIG": str(REPO / "playbooks" / "ansible.cfg"),
        "ANSIBLE_HOME": str(tmp / "ansible"),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    (tmp / "units").mkdir(exist_ok=True)
    argv = [
        str(BIN / "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        str(REPO / "playbooks" / "nightly.yml"),
        "-e",
        f"nightly_state_dir={tmp / 'state'}",
        "-e",
        f"nightly_unit_dir={tmp / 'units'}",
        "-e",
        "nightly_manage_systemd=false",
        "-e",
        "nightly_become=false",
        "-e",
        "nightly_keep=7",
        *extra,
    ]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def recap(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("localhost ")).split(":", 1)[1]


def test_units_rendered_verified_and_idempotent(tmp_path: Path) -> None:
    first = play(tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    service = (tmp_path / "units" / "mprig-nightly.service").read_text().splitlines()
    assert service[3:] == [
        "[Unit]",
        "Description=mprig nightly regression (experiments/nightly.yaml)",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=oneshot",
        "User=root",
        f"WorkingDirectory={REPO}",
        f"ExecStart={REPO}/.venv/bin/mprig nightly experiments/nightly.yaml \\",
        f"    --baseline {tmp_path}/state/baseline --history {tmp_path}/state/history \\",
        f"    --results {tmp_path}/state/nights --keep 7 \\",
        "    --tolerance 0.05 --effect 0.15",
        "TimeoutStartSec=4h",
        "Nice=5",
    ]
    timer = (tmp_path / "units" / "mprig-nightly.timer").read_text().splitlines()
    assert timer[3:] == [
        "[Unit]",
        "Description=Run the mprig nightly regression",
        "",
        "[Timer]",
        "OnCalendar=*-*-* 02:30:00",
        "Persistent=true",
        "Unit=mprig-nightly.service",
        "",
        "[Install]",
        "WantedBy=timers.target",
    ]
    second = play(tmp_path)
    assert recap(second.stdout).split()[:2] == ["ok=7", "changed=0"], second.stdout


def test_a_bad_calendar_is_refused_by_systemd_analyze(tmp_path: Path) -> None:
    done = play(tmp_path, "-e", "nightly_on_calendar='every full moon'")
    assert done.returncode == 2
    assert "Failed to parse calendar specification" in done.stdout
    assert not (tmp_path / "units" / "mprig-nightly.timer").exists()
