"""The MPTCP preflight of a lab campaign, on a native virtual rig whose paths get middleboxes
made of nftables rules on their routers: an intact path passes; a path that strips the MPTCP
option from data packets, or drops the DSS-bearing ones, is refused, named, with what failed.
The last test runs `mprig run` on the rig's generated inventory (the lab code path) and sees
the campaign refuse to start. One rig for the module; each test removes its nftables table."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mprig.campaign.spec import Direction
from mprig.campaign.spec import Path as SpecPath
from mprig.cli.run_lab import preflight
from mprig.errors import HostError
from mprig.rig import layout as L
from mprig.rig import virtual
from mprig.rig.host import Rig

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = "p5pre"
D = Direction(rate_mbit=10)
PATHS = (
    SpecPath(name="wifi", kind="wifi", down=D, up=D),
    SpecPath(name="cell", kind="cellular", down=D, up=D),
)
TABLE = "mprig_preflight_test"
STRIP_DATA = "ip length > 100 tcp option mptcp exists reset tcp option mptcp"
DROP_DSS = "tcp option mptcp subtype 2 drop"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    virtual.down(NAME)
    built = virtual.up(NAME, PATHS)  # provisioned: the client has a subflow endpoint per path
    try:
        yield built
    finally:
        virtual.down(NAME)


@pytest.fixture
def middlebox(rig: Rig) -> Iterator[Callable[[str], None]]:
    """install(rule) puts `rule` on the cell router's forward hook; removed afterwards."""
    cell = rig.hosts["cell"]

    def install(rule: str) -> None:
        ruleset = (f"table inet {TABLE} {{\n chain forward {{\n  type filter hook forward"
                   f" priority 0;\n  {rule}\n }}\n}}\n")  # fmt: skip
        cell.run(["nft", "-f", "-"], input=ruleset.encode())

    yield install
    cell.run(["nft", "delete", "table", "inet", TABLE], check=False)


def verdicts(results: Path) -> list[tuple[str, str]]:
    doc = json.loads((results / "preflight.json").read_text())
    return [(p["path"], p["verdict"]) for p in doc["paths"]]


def test_intact_paths_pass(rig: Rig, tmp_path: Path) -> None:
    said: list[str] = []
    preflight(rig, tmp_path, said.append)
    assert verdicts(tmp_path) == [("wifi", "ok"), ("cell", "ok")]
    doc = json.loads((tmp_path / "preflight.json").read_text())
    assert [(p["data_segments"] >= 2, p["data_segments"] == p["mapped_segments"])
            for p in doc["paths"]] == [(True, True), (True, True)]  # fmt: skip


def test_a_path_that_strips_mptcp_from_data_is_refused(
    rig: Rig, middlebox: Callable[[str], None], tmp_path: Path
) -> None:
    middlebox(STRIP_DATA)
    with pytest.raises(HostError) as refused:
        preflight(rig, tmp_path, lambda _: None)
    assert re.search(
        r"MPTCP preflight refused 1 of 2 paths: path cell \(wwan0\): dss-stripped: (\d+) of "
        r"\1 data segments on this path reached the server without a DSS mapping\. Nothing ran",
        str(refused.value),
    ), str(refused.value)
    assert verdicts(tmp_path) == [("wifi", "ok"), ("cell", "dss-stripped")]


def test_a_path_that_drops_dss_is_refused(
    rig: Rig, middlebox: Callable[[str], None], tmp_path: Path
) -> None:
    middlebox(DROP_DSS)
    with pytest.raises(HostError, match=r"refused 1 of 2 paths: path cell \(wwan0\): "):
        preflight(rig, tmp_path, lambda _: None)
    assert verdicts(tmp_path)[0] == ("wifi", "ok")
    assert verdicts(tmp_path)[1][1] in ("data-failed", "dss-stripped")


def test_a_lab_campaign_refuses_to_start(
    rig: Rig, middlebox: Callable[[str], None], tmp_path: Path
) -> None:
    """`mprig run --inventory` on the rig's own inventory takes the lab path (mode "lab"),
    run from the management namespace, where the hosts' sshd are reachable."""
    middlebox(STRIP_DATA)
    inventory = virtual.state_dir(NAME) / "inventory"
    argv = ["ip", "netns", "exec", L.namespace(NAME, "ctl"), sys.executable, "-m", "mprig.cli",
            "run", str(REPO / "experiments" / "smoke.yaml"), "--inventory", str(inventory),
            "--results", str(tmp_path), "--quiet"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "MPTCP preflight refused 1 of 2 paths: path cell (wwan0): dss-stripped" in done.stderr
    results = tmp_path / "smoke"
    assert verdicts(results) == [("wifi", "ok"), ("cell", "dss-stripped")]
    assert sorted(p.name for p in results.iterdir() if p.is_dir()) == []  # no run started
