"""playbooks/shards.yml: the syntax check, and the play applied for real to two shard hosts
that are this machine (connection local, a working directory each): packing, fetching,
unpacking and `mprig merge` of shard results written the way `mprig run --shard` writes
them; and a shard whose run cannot start failing the play with the argv it ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mprig.campaign.plan import expand
from mprig.campaign.shard import Shard, select
from mprig.campaign.spec import parse_campaign
from mprig.cli.cmd_run import write_campaign_json
from mprig.run import bundle

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOK = REPO / "playbooks" / "shards.yml"

SPEC = """\
name: pbshards
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants:
  - {name: mptcp}
  - {name: tcp_cell, protocol: tcp, path: cell}
repetitions: 2
"""


def env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_CONFIG": str(REPO / "playbooks" / "ansible.cfg"),
        "ANSIBLE_HOME": str(tmp / "ansible"),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }


def inventory(tmp: Path) -> Path:
    """Two shard hosts, both this machine, each with its own working directory."""
    hosts = {
        f"bench{i}": {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "shards_work_dir": str(tmp / f"bench{i}"),
        }
        for i in (1, 2)
    }
    path = tmp / "shards.yml"
    path.write_text(json.dumps({"mprig_shards": {"hosts": hosts}}))
    return path


def play(tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [
        str(BIN / "ansible-playbook"), "-i", str(inventory(tmp)), str(PLAYBOOK),
        "-e", f"shards_campaign={tmp / 'c.yaml'}", "-e", f"shards_fetch_dir={tmp / 'fetched'}",
        "-e", f"shards_mprig={BIN / 'mprig'}", "-e", f"ansible_python_interpreter={sys.executable}",
        *extra,
    ]  # fmt: skip
    return subprocess.run(argv, cwd=REPO, env=env(tmp), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def seed_shards(tmp: Path) -> list[str]:
    """Each host's working directory with its shard's results; the plan's run ids."""
    (tmp / "c.yaml").write_text(SPEC)
    campaign = parse_campaign(SPEC, "c.yaml")
    runs = expand(campaign)
    for i in (1, 2):
        results = tmp / f"bench{i}" / "results" / "pbshards"
        results.mkdir(parents=True)
        mine = select(runs, Shard(i, 2))
        write_campaign_json(results, "c.yaml", campaign, runs, shard=(Shard(i, 2), mine))
        for run in mine:
            staging = bundle.partial_dir(results, run.run_id)
            staging.mkdir()
            (staging / "client.pcap").write_bytes(run.run_id.encode())
            bundle.commit(results, run.run_id, {"run_id": run.run_id, "status": "complete"})
    return [r.run_id for r in runs]


def test_syntax_check(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", str(inventory(tmp_path)),
         str(PLAYBOOK)],
        cwd=REPO, env=env(tmp_path), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr.count("ERROR")) == (0, 0), done.stderr
    assert f"playbook: {PLAYBOOK}" in done.stdout


@pytest.mark.slow
def test_the_shards_are_fetched_and_merged(tmp_path: Path) -> None:
    plan = seed_shards(tmp_path)
    done = play(tmp_path, "-e", "shards_run=false")
    assert done.returncode == 0, done.stdout + done.stderr
    merged = tmp_path / "fetched" / "merged" / "pbshards"
    assert f"merged 4 of 4 planned runs from 2 directories into {merged}" in done.stdout
    status = subprocess.run([str(BIN / "mprig"), "status", str(merged), "--json"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    rows = json.loads(status.stdout)
    assert (status.returncode, [(r["run_id"], r["status"]) for r in rows]) == (
        0,
        [(run_id, "complete") for run_id in plan],
    )
    taken = json.loads((merged / "merge.json").read_text())["sources"]
    assert [s["shard"] for s in taken] == ["1/2", "2/2"]


@pytest.mark.slow
def test_a_shard_that_cannot_run_fails_the_play_with_its_argv(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(SPEC.replace("repetitions: 2", "repetitions: 0"))
    done = play(tmp_path, "-e", f"shards_checkout={REPO}")
    assert done.returncode == 2, done.stdout
    for i, host in ((1, "bench1"), (2, "bench2")):
        work = tmp_path / host
        assert f'"cmd": ["{BIN / "mprig"}", "run", "{work}/campaign.yaml", "--shard", "{i}/2"' \
            in done.stdout.replace(str(REPO / ".venv/bin"), str(BIN))  # fmt: skip
    assert "repetitions" in done.stdout
    assert not (tmp_path / "fetched").exists()
