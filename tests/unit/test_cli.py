"""The CLI wiring: help, version, and one-line errors with exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mprig import __version__
from mprig.cli.main import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"mprig {__version__}"


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "examples:" in capsys.readouterr().out


def test_a_closed_pipe_ends_quietly_without_traceback(tmp_path: Path) -> None:
    # Thousands of plan rows, read one line, close the pipe: `mprig plan F | head -1`.
    campaign = tmp_path / "big.yaml"
    campaign.write_text(
        "name: big\n"
        "paths: [{name: wifi, kind: wifi, rate_mbit: 10}]\n"
        "variants: [{name: mptcp}]\n"
        "sweep: {axes: {paths.wifi.delay_ms: {start: 0, stop: 4000, step: 1}}}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "mprig.cli", "plan", str(campaign)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b"index")
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (141, b"") or (proc.returncode == 0 and not err)
