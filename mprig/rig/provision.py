"""Apply mprig's playbooks with ansible-playbook (over SSH, like on a lab): rig.yml when a
virtual rig comes up, site.yml (or any playbook) with `mprig rig provision`, which can also
predict (--check) and lists what changed, or would change, per host."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mprig import datafiles
from mprig.errors import HostError, ToolMissing
from mprig.tools import which

PLAYBOOKS = datafiles.PLAYBOOKS


def ansible_tool(name: str) -> str:
    """An Ansible executable (ansible-playbook, ansible-inventory) next to our Python (the
    venv), else on PATH."""
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
    env: dict[str, str] | None = None,
) -> str:
    """Run the playbook against the inventory; return its output, HostError if it fails.

    Args:
        env: more environment for ansible-playbook (on top of ansible_env)."""
    (state / "ansible" / "tmp").mkdir(mode=0o700, parents=True, exist_ok=True)
    prefix = ["ip", "netns", "exec", netns] if netns else []
    argv = [*prefix, ansible_playbook(), "-i", str(inventory), str(PLAYBOOKS / playbook), *extra]
    p = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**ansible_env(state), **(env or {})},
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


# -- `mprig rig provision`: apply, or predict with --check, and say what changes ------------


@dataclass(frozen=True)
class Change:
    """One task that changed a host, or under --check would change it."""

    host: str  # inventory host name
    task: str  # "role : task name" as Ansible shows it
    item: str | None  # the loop item's label, None outside a loop
    how: str  # "changed", or "would run" (a command --check does not run)


@dataclass(frozen=True)
class Outcome:
    """What a provisioning run did or, with check, would do."""

    check: bool  # --check: nothing was changed, `changes` are predictions
    changes: tuple[Change, ...]  # in the order Ansible ran the tasks
    stats: dict[str, dict[str, int]]  # host -> ok, changed, failures, unreachable, skipped
    log: Path  # ansible-playbook's whole output (with --diff: the diffs)

    def by_host(self) -> dict[str, list[Change]]:
        """host -> its changes, for every host the play reached (no change: [])."""
        out: dict[str, list[Change]] = {h: [] for h in self.stats}
        for c in self.changes:
            out.setdefault(c.host, []).append(c)
        return out


def parse_changes(doc: dict[str, Any]) -> tuple[bool, tuple[Change, ...], dict[str, Any]]:
    """The mprig_changes callback's JSON document (playbooks/callback_plugins)."""
    changes = tuple(
        Change(c["host"], c["task"], c.get("item"), c["how"]) for c in doc.get("changes", [])
    )
    return bool(doc.get("check_mode")), changes, dict(doc.get("stats", {}))


def summary(outcome: Outcome) -> str:
    """Per host: how many tasks changed (or would change) it, and which."""
    verb = "would change" if outcome.check else "changed"
    lines = []
    for host, changes in sorted(outcome.by_host().items()):
        s = outcome.stats.get(host, {})
        trouble = [f"{k} {s[k]}" for k in ("failures", "unreachable") if s.get(k)]
        head = f"{host}: {verb} {len(changes)}" + (f" ({', '.join(trouble)})" if trouble else "")
        lines.append(head)
        for c in changes:
            item = f" [{c.item}]" if c.item else ""
            lines.append(f"  {c.task}{item}")
    return "\n".join(lines)


def provision(
    inventory: Path,
    state: Path,
    *,
    netns: str | None = None,
    playbook: str = "site.yml",
    check: bool = False,
    diff: bool = False,
    extra: tuple[str, ...] = (),
    timeout: float = 3600.0,
) -> Outcome:
    """Run `playbook` (with check: predict, change nothing) and list every change per host;
    HostError when a host fails or is unreachable."""
    report = state / "ansible" / "changes.json"
    report.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    flags = (*(("--check",) if check else ()), *(("--diff",) if diff else ()), *extra)
    env = {"ANSIBLE_CALLBACKS_ENABLED": "mprig_changes", "MPRIG_CHANGES_FILE": str(report)}
    apply(inventory, state, netns=netns, playbook=playbook, extra=flags, timeout=timeout, env=env)
    did_check, changes, stats = parse_changes(json.loads(report.read_text()))
    return Outcome(did_check, changes, stats, state / "ansible" / "last-run.log")
