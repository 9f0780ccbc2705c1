"""A full disk while mprig writes results: the error names the path, the previous good
files stay whole, and no temporary file is left behind (issue 14 part 4).

A small tmpfs stands in for the results disk; it is filled with a ballast file after a
first, successful report, then the report is written again."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import report_synth as rs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root)")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "mprig-test", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def mprig(*argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mprig.cli", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def fill(disk: Path) -> None:
    with open(disk / "ballast", "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * (1 << 16))
            f.flush()


def test_a_full_disk_leaves_the_previous_report_whole_and_names_the_path(
    small_disk: Path,
) -> None:
    root = rs.write(small_disk / "synth", rs.Synth(timeseries=False))
    first = mprig("report", str(root), "--format", "md,csv")
    assert first.returncode == 0, first.stderr
    report = root / "report"
    before = {p.name: p.read_bytes() for p in report.iterdir() if p.is_file()}
    assert "report.md" in before

    fill(small_disk)
    second = mprig("report", str(root), "--format", "md,csv")

    assert second.returncode != 0
    assert "No space left on device" in second.stderr
    assert str(root) in second.stderr
    assert "Traceback" not in second.stderr
    after = {p.name: p.read_bytes() for p in report.iterdir() if p.is_file()}
    assert after == before  # every file the old one or absent-before, none half-written
    leftovers = [p.name for p in root.rglob("*.tmp")] + [p.name for p in root.rglob(".*.tmp")]
    assert leftovers == []
