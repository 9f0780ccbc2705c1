"""`mprig rig provision` on a native virtual rig, with playbooks/site.yml: a second run changes
nothing, --check on the converged rig predicts nothing, and after one setting drifts on one
host --check names that host and the task that would put it back (and changes nothing).

Four site.yml runs, about 4 minutes on a shared 2-core machine (marked slow)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from mprig.campaign.spec import Direction
from mprig.campaign.spec import Path as SpecPath
from mprig.cli.main import main
from mprig.rig import virtual
from mprig.rig.host import Rig

# Four site.yml runs on a native virtual rig, about 5 min on 2 cores: `make test-long`, so
# `make test` stays under 45 minutes (test_links.py keeps the data-plane tasks in it).
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.long]

NAME = "p4prov"
D = Direction(rate_mbit=10)
PATHS = (
    SpecPath(name="wifi", kind="wifi", down=D, up=D),
    SpecPath(name="cell", kind="cellular", down=D, up=D),
)
HOSTS = ("ap", "cell", "client", "server")
KEY = "net.ipv4.tcp_no_metrics_save"  # common_sysctls sets it to 1 on every host


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    virtual.down(NAME)
    built = virtual.up(NAME, PATHS, provision_hosts=False)
    try:
        yield built
    finally:
        virtual.down(NAME)


def provision(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, list[str]]:
    """host -> the tasks `mprig rig provision` lists for it."""
    capsys.readouterr()
    assert main(["rig", "provision", "--rig", NAME, *flags]) == 0
    out: dict[str, list[str]] = {}
    host = ""
    for line in capsys.readouterr().out.splitlines():
        if m := re.match(r"^(\w+): (?:would change|changed) \d+", line):
            host = m[1]
            out[host] = []
        elif line.startswith("  ") and host:
            out[host].append(line.strip())
    return out


def test_second_run_changes_nothing_and_check_finds_drift(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    first = provision(capsys)
    assert sorted(first) == list(HOSTS)
    assert f"common : Set {KEY}" in first["client"]
    assert provision(capsys) == {h: [] for h in HOSTS}  # idempotent
    assert provision(capsys, "--check") == {h: [] for h in HOSTS}  # converged: nothing to do
    client = rig.hosts["client"]
    client.run(["sysctl", "-q", "-w", f"{KEY}=0"])
    predicted = provision(capsys, "--check", "--diff")
    assert predicted == {"ap": [], "cell": [], "client": [f"common : Set {KEY}"], "server": []}
    assert client.run(["sysctl", "-n", KEY]).stdout.strip() == "0"  # --check changed nothing
