"""The CLI wiring: help, version, and one-line errors with exit status."""

from __future__ import annotations

import pytest

from mprig import __version__
from mprig.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"mprig {__version__}"


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "examples:" in capsys.readouterr().out
