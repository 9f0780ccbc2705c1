"""The common role's data plane (tasks/links.yml: bridges, addresses, static routes, offloads
off on capture interfaces), what inventory/lab.example sets on lab hosts, applied for real
inside a scratch network namespace with Ansible's local connection: the first run sets it
all, a second run changes nothing, and --check after a drift names the task that would put
it back and changes nothing itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NS = "mprig-linkstest"

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VARS = {
    "common_bridges": [{"name": "br0", "ports": ["eth1"]}],
    "common_addresses": [{"dev": "eth2", "address": "198.51.100.17/28"},
                         {"dev": "br0", "address": "198.51.100.129/25"}],
    "common_routes": [{"to": "203.0.113.0/24", "via": "198.51.100.20"}],
    "common_offload_interfaces": ["eth1", "eth2"],
}  # fmt: skip
PLAY = [{"name": "Links", "hosts": "localhost", "gather_facts": False,
         "tasks": [{"name": "Data plane", "ansible.builtin.include_role":
                    {"name": "common", "tasks_from": "links"}}]}]  # fmt: skip


def sh(*argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", NS, *argv], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


@pytest.fixture
def netns() -> Iterator[None]:
    subprocess.run(["ip", "netns", "del", NS], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        for a, b in (("eth1", "peer1"), ("eth2", "peer2")):
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        yield
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True, check=False)


def play(tmp: Path, *flags: str) -> list[tuple[str, str | None, str]]:
    (tmp / "play.yml").write_text(yaml.safe_dump(PLAY, sort_keys=False))
    (tmp / "vars.json").write_text(json.dumps(VARS))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "playbooks" / "ansible.cfg"),
           "ANSIBLE_HOME": str(tmp / "ansible"), "ANSIBLE_LOCAL_TEMP": str(tmp / "tmp"),
           "ANSIBLE_CALLBACKS_ENABLED": "mprig_changes",
           "MPRIG_CHANGES_FILE": str(tmp / "changes.json")}  # fmt: skip
    argv = ["ip", "netns", "exec", NS, str(BIN / "ansible-playbook"), "-i", "localhost,", "-c",
            "local", "-e", f"ansible_python_interpreter={sys.executable}", "-e",
            f"@{tmp / 'vars.json'}", *flags, str(tmp / "play.yml")]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((tmp / "changes.json").read_text())
    return [(c["task"], c["item"], c["how"]) for c in doc["changes"]]


def test_links_converge_and_check_predicts(netns: None, tmp_path: Path) -> None:
    first = play(tmp_path)
    assert [(t.split(" : ")[1], i) for t, i, _ in first] == [
        ("Create the bridges", "br0"),
        ("Put the ports into their bridges", "eth1 -> br0"),
        ("Bring the data links up", "br0"),
        ("Bring the data links up", "eth1"),
        ("Bring the data links up", "eth2"),
        ("Add the addresses", "198.51.100.17/28 dev eth2"),
        ("Add the addresses", "198.51.100.129/25 dev br0"),
        ("Set the static routes", "203.0.113.0/24 via 198.51.100.20"),
        ("Turn offloads off on the data interfaces", "eth1"),
        ("Turn offloads off on the data interfaces", "eth2"),
    ]
    assert play(tmp_path) == []  # idempotent
    assert re.findall(r"^(tcp-segmentation-offload|generic-receive-offload): (\w+)",
                      sh("ethtool", "-k", "eth2"), re.M) == [
        ("tcp-segmentation-offload", "off"), ("generic-receive-offload", "off")]  # fmt: skip
    sh("ethtool", "-K", "eth2", "gro", "on")
    sh("ip", "route", "del", "203.0.113.0/24")
    assert play(tmp_path, "--check") == [
        ("common : Set the static routes", "203.0.113.0/24 via 198.51.100.20", "would run"),
        ("common : Turn offloads off on the data interfaces", "eth2", "would run"),
    ]
    assert "generic-receive-offload: on" in sh("ethtool", "-k", "eth2")  # --check changed nothing
