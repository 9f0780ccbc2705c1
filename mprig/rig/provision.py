"""Apply playbooks/rig.yml with ansible-playbook (over SSH, like on a lab)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mprig import datafiles
from mprig.errors import HostError, ToolMissing

PLAYBOOKS = datafiles.PLAYBOOKS


def ansible_tool(name: str) -> str:
    """An Ansible executable (ansible-playbook, ansible-inventory) next to our Python (the
    venv), else on PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    from shutil import which

    found = which(name)
    if not found:
        raise ToolMissing(f"{name} not found: pip install ansible-core (make setup)")
    return found


def ansible_playbook() -> str:
    """The ansible-playbook executable next to our Python (the venv), else on PATH."""
    return ansible_tool("ansible-playbook")


def ansible_env(state: Path) -> dict[str, str]:
    """Environment for Ansible: our ansible.cfg, temp and control dirs inside the rig state."""
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(PLAYBOOKS / "ansible.cfg"),
        ANSIBLE_HOME=str(state / "ansible"),
        ANSIBLE_LOCAL_TEMP=str(state / "ansible" / "tmp"),
        ANSIBLE_SSH_CONTROL_PATH_DIR=str(state / "ansible" / "cp"),
        ANSIBLE_HOST_KEY_CHECKING="True",
        ANSIBLE_NOCOLOR="1",
    )
    return env


def apply(
    inventory: Path,
    state: Path,
    *,
    netns: str | None = None,
    playbook: str = "rig.yml",
    extra: tuple[str, ...] = (),
    timeout: float = 600.0,
) -> str:
    """Run the playbook against the inventory; return its output, HostError if it fails."""
    (state / "ansible" / "tmp").mkdir(mode=0o700, parents=True, exist_ok=True)
    prefix = ["ip", "netns", "exec", netns] if netns else []
    argv = [*prefix, ansible_playbook(), "-i", str(inventory), str(PLAYBOOKS / playbook), *extra]
    p = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=ansible_env(state),
        timeout=timeout,
        check=False,
    )
    (state / "ansible" / "last-run.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        tail = [ln for ln in (p.stdout + p.stderr).splitlines() if "fatal" in ln or "ERROR" in ln]
        raise HostError(
            "ansible",
            f"{playbook} failed (exit {p.returncode}): {(tail or ['see log'])[0][:300]}; "
            f"full log: {state / 'ansible' / 'last-run.log'}",
        )
    return p.stdout
