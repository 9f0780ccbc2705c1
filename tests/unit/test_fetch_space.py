"""A full file system while a run's files are fetched (mprig/run/run_fetch.py unpack): the
scratch space (in VM mode the guest's /tmp, half its memory) fails that run with what to do,
the results' stops the campaign keeping completed runs; neither is a traceback. One run of
paper 004's Fig. 6(c) filled a 2 GB guest's /tmp and the inner runner died with
`OSError: [Errno 28]`, leaving 49 runs unrun."""

from __future__ import annotations

import errno
import io
import shutil
from pathlib import Path

import pytest

from mprig.errors import UsageError
from mprig.rig import vm
from mprig.run import run_fetch
from mprig.run.run_attempt import OutOfSpace, RunFailed


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    def copy(src: object, dst: object, length: int = 0) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", copy)


def test_scratch_full_fails_the_run_with_what_to_do(tmp_path: Path, full_disk: None) -> None:
    scratch, staging = tmp_path / "scratch", tmp_path / "staging"
    scratch.mkdir()
    with pytest.raises(RunFailed) as e:
        run_fetch.unpack(io.BytesIO(b"x"), 3 << 20, scratch / "client-eth1.pcap", staging)
    assert not e.value.transient  # the same run would fill it again
    text = str(e.value)
    assert "client-eth1.pcap (3 MiB)" in text and str(scratch) in text
    assert "MPRIG_VM_MEMORY" in text


def test_results_full_stops_the_campaign(tmp_path: Path, full_disk: None) -> None:
    with pytest.raises(OutOfSpace, match="completed runs are kept"):
        run_fetch.unpack(io.BytesIO(b"x"), 1, tmp_path / "run.json", tmp_path)


def test_other_write_errors_are_not_taken_for_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def copy(src: object, dst: object, length: int = 0) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(shutil, "copyfileobj", copy)
    with pytest.raises(OSError) as e:
        run_fetch.unpack(io.BytesIO(b"x"), 1, tmp_path / "a", tmp_path / "staging")
    assert e.value.errno == errno.EACCES and not isinstance(e.value, RunFailed)


def test_unpack_writes_when_there_is_room(tmp_path: Path) -> None:
    data = bytes(range(256)) * 20_000  # several of unpack's 1 MiB chunks
    run_fetch.unpack(io.BytesIO(data), len(data), tmp_path / "f", tmp_path)
    assert (tmp_path / "f").read_bytes() == data


def test_guest_memory_defaults_to_4g_and_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(vm.VM_MEMORY_ENV, raising=False)
    assert vm.vm_memory() == "4G"
    monkeypatch.setenv(vm.VM_MEMORY_ENV, "6144M")
    assert vm.vm_memory() == "6144M"
    for bad in ("4GB", "0G", "-1G", "lots"):
        monkeypatch.setenv(vm.VM_MEMORY_ENV, bad)
        with pytest.raises(UsageError, match="MPRIG_VM_MEMORY"):
            vm.vm_memory()
