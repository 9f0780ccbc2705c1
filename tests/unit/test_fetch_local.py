"""A virtual rig's files are taken where its namespaces wrote them (mprig/run/run_fetch.py
_take_local), as the tar through its SSH session would bring them: per-interface captures
linked into the join's scratch, the rest copied into staging under their bundle names, only
regular files, a missing one left to be named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mprig.run import run_fetch
from mprig.run.run_attempt import RunFailed


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    remote, parts, staging = (tmp_path / n for n in ("remote", "parts", "staging"))
    for d in (remote, parts, staging):
        d.mkdir()
    (remote / "server-eth1.pcap").write_bytes(b"pcap" * 1000)
    (remote / "tcpdump-eth1.log").write_text("listening on eth1\n")
    (remote / "ss.txt").write_text("# 1.0\n")
    (remote / "iperf3-server.json").write_text("{}")
    return remote, parts, staging


def test_files_are_taken_under_their_bundle_names(dirs: tuple[Path, Path, Path]) -> None:
    remote, parts, staging = dirs
    wanted = {"server-eth1.pcap", "tcpdump-eth1.log", "ss.txt", "iperf3-server.json", "gone"}
    run_fetch._take_local(remote, "server", wanted, parts, staging)
    assert wanted == {"gone"}  # left for fetch_stage to name as not fetched
    assert sorted(p.name for p in parts.iterdir()) == [
        ".server-eth1.pcap",
        ".tcpdump-server-eth1.log",
    ]
    assert sorted(p.name for p in staging.iterdir()) == ["iperf3-server.json", "ss-server.txt"]
    # a capture is linked, not copied (one file); what goes to staging is a copy
    assert (
        os.stat(parts / ".server-eth1.pcap").st_ino == os.stat(remote / "server-eth1.pcap").st_ino
    )
    assert os.stat(staging / "ss-server.txt").st_ino != os.stat(remote / "ss.txt").st_ino
    assert (staging / "ss-server.txt").read_text() == "# 1.0\n"


def test_only_regular_files_are_taken(dirs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    remote, parts, staging = dirs
    (tmp_path / "secret").write_text("not the rig's")
    (remote / "ss.txt").unlink()
    (remote / "ss.txt").symlink_to(tmp_path / "secret")
    with pytest.raises(RunFailed, match=r"server: ss\.txt is not a file"):
        run_fetch._take_local(remote, "server", {"ss.txt"}, parts, staging)
    assert not (staging / "ss-server.txt").exists()
