"""`mprig rig provision`'s per-host summary, from the JSON the mprig_changes callback
(playbooks/callback_plugins) writes, and the callback itself on a local play under --check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mprig.rig.provision import Change, Outcome, parse_changes, summary

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOC = {
    "check_mode": True,
    "changes": [
        {"host": "client", "task": "common : Set net.ipv4.tcp_no_metrics_save", "item": None,
         "how": "would run"},
        {"host": "client", "task": "mptcp : Add the wanted endpoints",
         "item": "10.2.1.2 dev wwan0", "how": "would run"},
        {"host": "ap", "task": "wifi_ap : Write the hostapd config", "item": None,
         "how": "changed"},
    ],
    "stats": {
        h: {"ok": 9, "changed": 0, "failures": 0, "unreachable": 0, "skipped": 3}
        for h in ("ap", "client", "server")
    },
}  # fmt: skip


def test_summary_lists_each_hosts_changes() -> None:
    check, changes, stats = parse_changes(DOC)
    outcome = Outcome(check, changes, stats, Path("/x/last-run.log"))
    assert summary(outcome).splitlines() == [
        "ap: would change 1",
        "  wifi_ap : Write the hostapd config",
        "client: would change 2",
        "  common : Set net.ipv4.tcp_no_metrics_save",
        "  mptcp : Add the wanted endpoints [10.2.1.2 dev wwan0]",
        "server: would change 0",
    ]
    assert changes[1] == Change("client", "mptcp : Add the wanted endpoints",
                                "10.2.1.2 dev wwan0", "would run")  # fmt: skip


def test_summary_names_failed_and_unreachable_hosts() -> None:
    stats = {
        "server": {"ok": 1, "changed": 0, "failures": 1, "unreachable": 0, "skipped": 0},
        "ap": {"ok": 0, "changed": 0, "failures": 0, "unreachable": 1, "skipped": 0},
    }
    outcome = Outcome(False, (), stats, Path("/x"))  # fmt: skip
    assert summary(outcome).splitlines() == [
        "ap: changed 0 (unreachable 1)",
        "server: changed 0 (failures 1)",
    ]


PLAY = """\
- name: Local
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Read a value
      ansible.builtin.command: {argv: [cat, "{state}"]}
      register: now
      changed_when: false
      check_mode: false
    - name: Write it when it differs
      ansible.builtin.command: {argv: [cp, /dev/null, "{state}"]}
      changed_when: true
      when: now.stdout != ""
    - name: Never changes anything
      ansible.builtin.command: {argv: ["true"]}
      changed_when: false
    - name: A file
      ansible.builtin.copy: {dest: "{copy}", content: "x\\n", mode: "0600"}
"""


@pytest.mark.slow
def test_callback_counts_commands_check_mode_would_run(tmp_path: Path) -> None:
    state, copy = tmp_path / "state", tmp_path / "copy"
    state.write_text("drifted\n")
    (tmp_path / "play.yml").write_text(PLAY.replace("{state}", str(state))
                                       .replace("{copy}", str(copy)))  # fmt: skip
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "playbooks" / "ansible.cfg"),
        "ANSIBLE_HOME": str(tmp_path / "ansible"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_CALLBACKS_ENABLED": "mprig_changes",
        "MPRIG_CHANGES_FILE": str(tmp_path / "changes.json"),
    }
    argv = [
        str(BIN / "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        "--check",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        str(tmp_path / "play.yml"),
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((tmp_path / "changes.json").read_text())
    assert (doc["check_mode"], [(c["task"], c["how"]) for c in doc["changes"]]) == (
        True, [("Write it when it differs", "would run"), ("A file", "changed")],
    )  # fmt: skip
    assert (state.read_text(), copy.exists()) == ("drifted\n", False)  # nothing was changed
