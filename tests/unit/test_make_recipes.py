"""The Makefile's recipes run under `bash -eu -o pipefail` (its .SHELLFLAGS): a recipe that
means to go on after a failing command must say so. Each test runs a real `make` with BIN
pointing at a stand-in `mprig` that logs its arguments and exits with a chosen status per
command (0 for the others), and `-o setup`, so nothing is installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def make(tmp_path: Path, target: str, *args: str, **status: int) -> tuple[int, list[str], str]:
    """make's status, the stand-in's calls and make's stderr; STATUS maps an mprig command
    (backlog, collect) to the status the stand-in exits with."""
    log = tmp_path / "calls"
    fake = tmp_path / "bin"
    fake.mkdir()
    cases = "".join(f"  {command}) exit {code};;\n" for command, code in status.items())
    script = f'#!/bin/sh\necho "$*" >> {log}\ncase "$1" in\n{cases}esac\nexit 0\n'
    (fake / "mprig").write_text(script)
    (fake / "mprig").chmod(0o755)
    argv = ["make", "-s", "-C", str(ROOT), "-o", "setup", target, f"BIN={fake}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    calls = log.read_text().splitlines() if log.exists() else []
    return done.returncode, calls, done.stderr


def campaign(tmp_path: Path) -> str:
    """A campaign file named t-full (no archive of that name exists)."""
    spec = tmp_path / "t-full.yaml"
    spec.write_text("name: t-full\n")
    return f"CAMPAIGN={spec}"


def test_paper_full_refreshes_the_docs_table_when_the_backlog_stops_on_time(
    tmp_path: Path,
) -> None:
    """`mprig backlog --run` exits 3 when --stop-after stops it with runs left. The table of
    what is left (docs/papers.md) must still be rewritten, and make must still fail, so that
    no reproduction is written from a partial archive."""
    status, calls, _ = make(tmp_path, "paper-full", "PAPER=004", "STOP_AFTER=1s", backlog=3)
    assert status != 0
    assert calls == [
        "backlog 004 --min-n 5 --run --stop-after 1s",
        "reproduce --docs docs/papers.md",
    ]


def test_paper_full_writes_the_reproduction_once_the_backlog_is_done(tmp_path: Path) -> None:
    status, calls, _ = make(tmp_path, "paper-full", "PAPER=004", backlog=0)
    assert status == 0
    assert calls == [
        "backlog 004 --min-n 5 --run",
        "reproduce --docs docs/papers.md",
        "reproduce 004 --profile full --results reports/archived-runs --min-n 5",
        "reproduce --docs docs/papers.md --html",
    ]


SHARD = "results/shard-1-of-5/t-full"
SHARD_CALLS = [
    f"collect {SHARD}",
    f"archive {SHARD} reports/archived-runs/t-full",
    "reproduce --docs docs/papers.md",
]


@pytest.mark.parametrize(
    ("collect", "calls", "error"),
    [
        (0, SHARD_CALLS, None),
        # artifact problems (their metrics null, the runs listed): the shard's finished
        # runs are archived all the same, and make still fails with collect's status
        (1, SHARD_CALLS, "Error 1"),
        # could not collect (bad input, duplicate bundles): nothing is archived
        (2, SHARD_CALLS[:1], "Error 2"),
    ],
)
def test_paper_shard_archives_what_collect_wrote_despite_artifact_problems(
    tmp_path: Path, collect: int, calls: list[str], error: str | None
) -> None:
    """`mprig collect` exits 1 when some run's artifacts had problems while it wrote every
    table; make stopped there, and hours of finished runs waited for an archive by hand."""
    status, seen, stderr = make(tmp_path, "paper-shard", campaign(tmp_path), "SHARD=1/5",
                                collect=collect)  # fmt: skip
    assert seen[0].startswith(f"run {tmp_path}/t-full.yaml --shard 1/5 --results")
    assert (seen[1:], status != 0) == (calls, error is not None)
    if error:
        assert f"paper-shard] {error}" in stderr
    assert ("mprig collect found artifact problems" in stderr) == (collect == 1)


@pytest.mark.parametrize(
    ("collect", "calls", "error"),
    [
        (0, ["collect results/t-full", "report results/t-full"], None),
        (1, ["collect results/t-full", "report results/t-full"], "Error 1"),
        (2, ["collect results/t-full"], "Error 2"),
    ],
)
def test_make_run_reports_despite_artifact_problems(
    tmp_path: Path, collect: int, calls: list[str], error: str | None
) -> None:
    """The report leaves out, and lists, the runs collect marked; it is written all the same."""
    status, seen, stderr = make(tmp_path, "run", campaign(tmp_path), collect=collect)
    assert (seen, status != 0) == ([f"run {tmp_path}/t-full.yaml", *calls], error is not None)
    if error:
        assert f"run] {error}" in stderr
    assert ("mprig collect found artifact problems" in stderr) == (collect == 1)
