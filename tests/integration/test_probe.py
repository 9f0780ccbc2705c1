"""`mprig probe` on a native virtual rig: a clean path returns MP_CAPABLE; a path whose router
strips the option with nftables (`reset tcp option mptcp`) or drops SYNs carrying it is
reported as such. One rig for the module; each test removes its nftables table."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mprig.campaign.spec import Direction
from mprig.campaign.spec import Path as SpecPath
from mprig.cli.main import main
from mprig.rig import virtual
from mprig.rig.host import Rig
from mprig.rig.probe import PathProbe, probe

NAME = "h7probe"
D = Direction(rate_mbit=10)
PATHS = (
    SpecPath(name="wifi", kind="wifi", down=D, up=D),
    SpecPath(name="cell", kind="cellular", down=D, up=D),
)
TABLE = "mprig_probe_test"
# Without endpoints (the rig is not provisioned) the whole transfer crosses the path.
OK = ("MP_CAPABLE handshake, 48000 bytes echoed, 34 data segments on this path, each with a "
      "DSS mapping")  # fmt: skip


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    virtual.down(NAME)
    built = virtual.up(NAME, PATHS, provision_hosts=False)
    # test_dropping_router loses MPTCP SYNs: without this the client's kernel would open the
    # next tests' connections as plain TCP for an hour (its MPTCP blackhole detection).
    built.hosts["client"].run(["sysctl", "-q", "-w", "net.mptcp.blackhole_timeout=0"], check=False)
    try:
        yield built
    finally:
        virtual.down(NAME)


@pytest.fixture
def cell_rule(rig: Rig) -> Iterator[None]:
    """Removes the test's nftables table from the cell router afterwards."""
    yield
    rig.hosts["cell"].run(["nft", "delete", "table", "inet", TABLE], check=False)


def install(rig: Rig, rule: str) -> None:
    cell = rig.hosts["cell"]
    ruleset = (
        f"table inet {TABLE} {{\n chain forward {{\n  type filter hook forward priority 0;\n"
        f"  {rule}\n }}\n}}\n"
    )
    cell.run(["nft", "-f", "-"], input=ruleset.encode())


def summary(results: list[PathProbe]) -> list[tuple[str, str, str, bool | None, bool | None]]:
    return [(r.path, r.verdict, r.detail, r.syn_mp_capable, r.synack_mp_capable) for r in results]


def test_clean_paths_return_the_option(rig: Rig) -> None:
    results = probe(rig, seed=1)
    assert [(r.path, r.verdict, r.syn_mp_capable, r.synack_mp_capable) for r in results] == [
        ("wifi", "ok", True, True),
        ("cell", "ok", True, True),
    ]
    assert [r.data_segments == r.mapped_segments for r in results] == [True, True]
    assert [r.server_seq == r.sent_seq for r in results] == [True, True]


def test_stripping_router_is_reported(rig: Rig, cell_rule: None) -> None:
    install(rig, "tcp flags syn tcp option mptcp exists reset tcp option mptcp")
    assert summary(probe(rig, seed=2)) == [
        ("wifi", "ok", OK, True, True),
        ("cell", "stripped", "the SYN reached the server without MP_CAPABLE", False, False),
    ]


def test_dropping_router_is_reported(rig: Rig, cell_rule: None) -> None:
    install(rig, "tcp option mptcp exists drop")
    assert summary(probe(rig, seed=3, timeout=1.5)) == [
        ("wifi", "ok", OK, True, True),
        ("cell", "no-answer", "the SYN never reached the server", None, None),
    ]


def test_cli_exit_status_and_table(rig: Rig, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--rig", NAME]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["path", "interface", "verdict"],
        ["wifi", "wlan0", "ok"],
        ["cell", "wwan0", "ok"],
    ]
