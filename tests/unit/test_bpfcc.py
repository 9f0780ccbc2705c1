"""mprig.stack.bpfcc's pure parts: which names are BPF programs, the clang command, staleness,
the cache directory and what is missing to build (no root, no kernel)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mprig.stack import bpfcc


def test_shipped_programs_have_sources() -> None:
    assert bpfcc.available() == (
        "prr",
        "door",
        "lia",
        "cwa",
        "olia",
        "fccc",
        "prr_lia",
        "door_lia",
        "door_fccc",
    )
    sources = sorted(p.name for p in bpfcc.SOURCE_DIR.glob("*.c"))
    assert sources == [
        "cwa.c",
        "door.c",
        "door_fccc.c",
        "door_lia.c",
        "fccc.c",
        "lia.c",
        "olia.c",
        "prr.c",
        "prr_lia.c",
    ]


def test_bpf_names_keeps_order_and_drops_kernel_algorithms() -> None:
    assert bpfcc.bpf_names(["cubic", "door", "reno", "prr", "door"]) == ["door", "prr"]


def test_clang_argv_builds_a_core_bpf_object() -> None:
    src, obj, inc = Path("/s/bpf/prr.c"), Path("/c/prr.o"), Path("/c")
    assert bpfcc.clang_argv(src, obj, inc) == [
        "clang",
        "-target",
        "bpf",
        "-mcpu=v3",
        "-O2",
        "-g",
        "-Wall",
        "-Werror",
        "-I/c",
        "-I/s/bpf",
        "-c",
        "/s/bpf/prr.c",
        "-o",
        "/c/prr.o",
    ]


def test_is_stale_follows_make(tmp_path: Path) -> None:
    src, obj = tmp_path / "a.c", tmp_path / "a.o"
    src.write_text("x")
    assert bpfcc.is_stale(obj, [src])
    obj.write_text("o")
    os.utime(src, ns=(1_000_000_000, 1_000_000_000))
    os.utime(obj, ns=(2_000_000_000, 2_000_000_000))
    assert not bpfcc.is_stale(obj, [src])
    os.utime(src, ns=(3_000_000_000, 3_000_000_000))
    assert bpfcc.is_stale(obj, [src])


def test_missing_requirements_name_the_packages() -> None:
    everything = bpfcc.missing_requirements(
        {"clang": "/usr/bin/clang", "bpftool": "/usr/sbin/bpftool"}, ["bpf/bpf_helpers.h"], True
    )
    assert everything == []
    assert bpfcc.missing_requirements({"clang": None}, [], False) == [
        "clang (apt-get install clang)",
        "bpftool (apt-get install bpftool)",
        "bpf/bpf_helpers.h (apt-get install libbpf-dev)",
        "kernel BTF /sys/kernel/btf/vmlinux (a kernel built with CONFIG_DEBUG_INFO_BTF=y)",
    ]


def test_cache_dir_is_per_kernel_release(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    release = os.uname().release
    monkeypatch.setenv("MPRIG_BPF_CACHE", str(tmp_path))
    assert bpfcc.cache_dir() == tmp_path / release
    monkeypatch.delenv("MPRIG_BPF_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert bpfcc.cache_dir() == tmp_path / "xdg" / "mprig" / "bpf" / release


def test_build_rejects_unknown_programs() -> None:
    known = r"\(known: prr, door, lia, cwa, olia, fccc, prr_lia, door_lia, door_fccc\)"
    with pytest.raises(bpfcc.MprigError, match=rf"no BPF program balia {known}"):
        bpfcc.build(["prr", "balia"])
