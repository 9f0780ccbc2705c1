"""BPF congestion controls built on the host for the VM's kernel (mprig/stack/vmbpf.py): the
release and the vmlinux ELF read from a bzImage, and a prebuild that the guest finds fresh
(the same header the guest would dump, objects only where stale)."""

from __future__ import annotations

import gzip
import lzma
import os
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mprig.rig import vmprobe
from mprig.stack import vmbpf


def bzimage(version: bytes, payload: bytes) -> bytes:
    """A bzImage's first bytes: the setup header with its version pointer, the version
    string, then a compressed payload behind some bytes of decompressor."""
    head = bytearray(0x1000)
    head[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", head, 0x20E, 0x300)
    head[0x500 : 0x500 + len(version) + 1] = version + b"\0"
    return bytes(head) + b"\x90" * 64 + payload + b"\0" * 32


def test_the_release_comes_from_the_setup_header() -> None:
    image = bzimage(b"6.1.0-57-amd64 (debian-kernel@lists.debian.org) #1 SMP", b"")
    assert vmbpf.kernel_release(image) == "6.1.0-57-amd64"
    assert vmbpf.kernel_release(b"\0" * 0x1000) is None  # not a bzImage
    assert vmbpf.kernel_release(bzimage(b"", b"")) is None


@pytest.mark.parametrize("compress", [lzma.compress, gzip.compress], ids=["xz", "gzip"])
def test_the_vmlinux_elf_is_found_behind_the_decompressor(
    compress: Callable[[bytes], bytes],
) -> None:
    elf = b"\x7fELF" + os.urandom(4096)
    image = bzimage(b"6.1.0-x", compress(elf))
    assert vmbpf.vmlinux(image) == elf
    assert vmbpf.vmlinux(bzimage(b"6.1.0-x", compress(b"not an elf"))) is None
    assert vmbpf.vmlinux(b"\xfd7zXZ\x00 broken") is None


def test_prebuild_makes_what_the_guest_would_and_only_what_is_stale(tmp_path: Path) -> None:
    """The real VM kernel (make setup installs linux-image-amd64): vmlinux.h is bpftool's
    dump of that kernel's BTF, the BPF programs named are built once, one older than its
    source again alone."""
    kernel = vmprobe.find_kernel()
    said: list[str] = []
    built = vmbpf.prebuild(kernel, tmp_path, ["cubic", "lia", "cwa", "lia"], said.append)
    release = vmbpf.kernel_release(kernel.read_bytes())
    assert release is not None and built == ["lia", "cwa"], said  # mprig's own, once each
    out = tmp_path / release
    elf = tmp_path / "vmlinux"
    elf.write_bytes(vmbpf.vmlinux(kernel.read_bytes()) or b"")
    dump = subprocess.run(["bpftool", "btf", "dump", "file", str(elf), "format", "c"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert (out / "vmlinux.h").read_text() == dump
    assert vmbpf.prebuild(kernel, tmp_path, ["lia", "cwa"], said.append) == []
    os.utime(out / "cwa.o", ns=(0, 0))  # older than its source, as after an edit of it
    assert vmbpf.prebuild(kernel, tmp_path, ["lia", "cwa"], said.append) == ["cwa"]


def test_an_unreadable_kernel_is_left_to_the_guest(tmp_path: Path) -> None:
    said: list[str] = []
    assert vmbpf.prebuild(tmp_path / "vmlinuz-none", tmp_path, ["lia"], said.append) == []
    assert said and "the VM builds them" in said[0]
    (tmp_path / "vmlinuz-junk").write_bytes(b"junk" * 1000)
    assert vmbpf.prebuild(tmp_path / "vmlinuz-junk", tmp_path, ["lia"], said.append) == []


def test_for_vm_builds_into_the_guests_cache_for_the_kernel_vm_mode_boots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """for_vm picks the cache the guest reads (MPRIG_BPF_CACHE) and the kernel VM mode boots
    (MPRIG_VM_KERNEL here, a copy of the real one); nothing to do, or no kernel, is a no-op
    (the boot names a missing kernel itself)."""
    cache, kernel = tmp_path / "cache", tmp_path / "vmlinuz-copy"
    kernel.write_bytes(vmprobe.find_kernel().read_bytes())
    monkeypatch.setenv("MPRIG_BPF_CACHE", str(cache))
    monkeypatch.setenv(vmprobe.VM_KERNEL_ENV, str(kernel))
    said: list[str] = []
    assert vmbpf.for_vm(["cubic", "reno"], said.append) == [] == said  # not mprig's programs
    assert vmbpf.for_vm(["lia"], said.append) == ["lia"]
    release = vmbpf.kernel_release(kernel.read_bytes())
    assert (cache / str(release) / "lia.o").stat().st_size > 0
    assert vmbpf.for_vm(["lia"], said.append) == []  # fresh now
    monkeypatch.setenv(vmprobe.VM_KERNEL_ENV, str(tmp_path / "vmlinuz-none"))
    assert vmbpf.for_vm(["cwa"], said.append) == []
