"""Opening user-given paths: regular files only, refused before any blocking open."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mprig.safeio import NotRegularFile, check_regular, escape, open_regular, read_regular


def test_regular_file_is_read(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_bytes(b"name: x\n")
    assert read_regular(f, 100) == b"name: x\n"
    with open_regular(f) as handle:
        assert handle.read() == b"name: x\n"
    assert check_regular(f) == f


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile) as e:
        open_regular(fifo, "campaign file")
    assert str(e.value) == f"{fifo}: campaign file is a FIFO (named pipe), not a regular file"
    with pytest.raises(NotRegularFile):
        check_regular(fifo)


def test_directory_and_device_are_refused(tmp_path: Path) -> None:
    for path, kind in ((tmp_path, "a directory"), (Path("/dev/null"), "a character device")):
        with pytest.raises(NotRegularFile) as e:
            read_regular(path, 10)
        assert str(e.value) == f"{path}: file is {kind}, not a regular file"


def test_missing_file_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")


def test_escape_control_characters() -> None:
    assert escape("plain text: ok") == "plain text: ok"
    assert escape("a\nmprig: error: forged\x1b[31m\x07\u2028\x85") == (
        "a\\nmprig: error: forged\\e[31m\\x07\\u2028\\x85"
    )


def test_fifo_run_json_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    from mprig.run import bundle

    os.mkfifo(tmp_path / "run.json")
    with pytest.raises(ValueError) as e:
        bundle.read_record(tmp_path)
    assert str(e.value) == (
        f"{tmp_path}/run.json: run.json is a FIFO (named pipe), not a regular file"
    )
    os.mkfifo(tmp_path / "client.pcap")
    with pytest.raises(NotRegularFile):
        bundle.sha256_file(tmp_path / "client.pcap")
