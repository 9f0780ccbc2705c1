"""The Makefile's recipes run under `bash -eu -o pipefail` (its .SHELLFLAGS): a recipe that
means to go on after a failing command must say so. Each test runs a real `make` with BIN
pointing at a stand-in `mprig` that logs its arguments and exits with a chosen status, and
`-o setup`, so nothing is installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def make(tmp_path: Path, target: str, *args: str, backlog_status: int) -> tuple[int, list[str]]:
    log = tmp_path / "calls"
    fake = tmp_path / "bin"
    fake.mkdir()
    script = f'#!/bin/sh\necho "$*" >> {log}\n[ "$1" = backlog ] && exit {backlog_status}\nexit 0\n'
    (fake / "mprig").write_text(script)
    (fake / "mprig").chmod(0o755)
    argv = ["make", "-s", "-C", str(ROOT), "-o", "setup", target, f"BIN={fake}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    calls = log.read_text().splitlines() if log.exists() else []
    return done.returncode, calls


def test_paper_full_refreshes_the_docs_table_when_the_backlog_stops_on_time(
    tmp_path: Path,
) -> None:
    """`mprig backlog --run` exits 3 when --stop-after stops it with runs left. The table of
    what is left (docs/papers.md) must still be rewritten, and make must still fail, so that
    no reproduction is written from a partial archive."""
    status, calls = make(tmp_path, "paper-full", "PAPER=004", "STOP_AFTER=1s", backlog_status=3)
    assert status != 0
    assert calls == [
        "backlog 004 --min-n 5 --run --stop-after 1s",
        "reproduce --docs docs/papers.md",
    ]


def test_paper_full_writes_the_reproduction_once_the_backlog_is_done(tmp_path: Path) -> None:
    status, calls = make(tmp_path, "paper-full", "PAPER=004", backlog_status=0)
    assert status == 0
    assert calls == [
        "backlog 004 --min-n 5 --run",
        "reproduce --docs docs/papers.md",
        "reproduce 004 --profile full --results reports/archived-runs --min-n 5",
        "reproduce --docs docs/papers.md --html",
    ]
