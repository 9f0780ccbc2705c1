"""The disk VM's stand-in boot loader picks what GRUB's default entry would: the newest
/boot/vmlinuz-* in version order, read off a real ext4 image (mke2fs -d, debugfs)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mprig.rig import diskvm

pytestmark = pytest.mark.skipif(
    not (shutil.which("mke2fs") or Path("/usr/sbin/mke2fs").exists()), reason="no e2fsprogs"
)


def image(tmp_path: Path, names: list[str]) -> Path:
    root = tmp_path / "root"
    (root / "boot").mkdir(parents=True)
    for name in names:
        (root / "boot" / name).write_text(name)
    disk = tmp_path / "disk.img"
    subprocess.run(["/usr/sbin/mke2fs", "-q", "-t", "ext4", "-d", str(root), str(disk), "8M"],
                   check=True)  # fmt: skip
    return disk


def test_the_newest_release_boots_first(tmp_path: Path) -> None:
    disk = image(tmp_path, ["vmlinuz-6.1.0-27-amd64", "initrd.img-6.1.0-27-amd64",
                            "vmlinuz-6.1.192-mprig-lab", "vmlinuz-6.1.9-x", "System.map-7.0",
                            "config-7.0"])  # fmt: skip
    assert diskvm.boot_entries(disk) == ["6.1.192-mprig-lab", "6.1.9-x", "6.1.0-27-amd64"]


def test_a_disk_without_a_kernel_is_named(tmp_path: Path) -> None:
    disk = image(tmp_path, ["config-6.1.0-27-amd64"])
    with pytest.raises(RuntimeError, match=r"disk.img: no /boot/vmlinuz-\* to boot"):
        diskvm.boot_entries(disk)
