"""A QEMU guest with a disk of its own: the lab machine the kernel role installs a kernel on
and reboots (issue 17 part 2).

The VM lab's other guest (rig/vmlab.py) boots a bzImage under virtme-ng on the host's own
root file system, so nothing can be installed in it and rebooted into. This one is a Debian 12
machine: an ext4 disk made by mmdebstrap (systemd, openssh-server, python3-apt, Debian's stock
kernel with its initramfs), reached over SSH on a loopback port forward, its host key checked
against the key read off the disk.

**Stand-in for a boot loader.** QEMU runs with -no-reboot, so a reboot inside the guest ends
QEMU, and the supervisor boots what GRUB's default entry would: the newest /boot/vmlinuz-* in
version order (grub-mkconfig's order), with its initrd.img-*, read off the disk with debugfs.
Installing a kernel package and rebooting therefore boots it, as on a lab machine; every boot's
release is kept in `DiskVM.boots`.

    python -m mprig.rig.diskvm image     # build the cached image (about 5 minutes)
    python -m mprig.rig.diskvm boot      # boot a copy, print the ssh command, wait for Ctrl-C
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mprig.rig import kvm

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = (
    "systemd-sysv,udev,dbus,openssh-server,python3,python3-apt,iproute2,procps,kmod,"
    "linux-image-amd64,initramfs-tools,e2fsprogs"
)
IMAGE_SIZE = "4G"  # sparse: about 1 GB is used, the rest holds the packages a role installs
BOOT_LINE = "root=/dev/vda rootfstype=ext4 rw console=ttyS0 net.ifnames=0 systemd.show_status=0"


def home() -> Path:
    return kvm.cache_dir() / "diskvm"


def image_path() -> Path:
    return home() / f"debian12-{SUITE}.img"


def key_path() -> Path:
    """Root's SSH key for every disk VM (the public half is in the image)."""
    return home() / "id_ed25519"


def _run(argv: list[str], what: str, timeout: float = 1800) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"{what} failed ({argv[0]} exit {done.returncode}): " + " | ".join(tail))
    return done.stdout


def _guest_files(root: Path, public_key: str) -> None:
    """What a lab machine has that mmdebstrap does not write: root's key, fstab, DHCP on the
    first NIC (QEMU's user network), a hostname."""
    ssh = root / "root" / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    (ssh / "authorized_keys").write_text(public_key)
    (ssh / "authorized_keys").chmod(0o600)
    (root / "etc" / "fstab").write_text("/dev/vda / ext4 defaults,errors=remount-ro 0 1\n")
    (root / "etc" / "hostname").write_text("mprig-disk\n")
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n127.0.1.1 mprig-disk\n")
    net = root / "etc" / "systemd" / "network" / "10-eth0.network"
    net.write_text("[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n")
    wants = root / "etc" / "systemd" / "system" / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / "systemd-networkd.service"
    if not link.exists():
        link.symlink_to("/lib/systemd/system/systemd-networkd.service")


def ensure_image(say: Callable[[str], None] = print) -> Path:
    """The cached disk image, built once: mmdebstrap into a directory, then mke2fs -d (no loop
    device needed). Written under a temporary name and renamed: never half an image."""
    image = image_path()
    if image.exists():
        return image
    home().mkdir(parents=True, exist_ok=True)
    if not key_path().exists():
        tmp_key = key_path().with_suffix(".tmp")
        for f in (tmp_key, tmp_key.with_suffix(".tmp.pub")):
            f.unlink(missing_ok=True)
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mprig-diskvm", "-f",
              str(tmp_key)], "ssh-keygen")  # fmt: skip
        os.replace(tmp_key.with_suffix(".tmp.pub"), key_path().with_suffix(".pub"))
        os.replace(tmp_key, key_path())
    with tempfile.TemporaryDirectory(prefix="diskvm-", dir=home()) as tmp:
        root = Path(tmp) / "root"
        say(f"diskvm: mmdebstrap {SUITE} with {PACKAGES} (several minutes)")
        _run(["mmdebstrap", "--mode=root", "--variant=apt", f"--include={PACKAGES}", SUITE,
              str(root), MIRROR], "mmdebstrap", timeout=3600)  # fmt: skip
        _guest_files(root, key_path().with_suffix(".pub").read_text())
        part = Path(tmp) / "disk.img"
        say(f"diskvm: mke2fs -d into a {IMAGE_SIZE} ext4 image")
        _run(["mke2fs", "-q", "-t", "ext4", "-L", "root", "-d", str(root), str(part), IMAGE_SIZE],
             "mke2fs")  # fmt: skip
        os.replace(part, image)
    return image


def _debugfs(disk: Path, request: str) -> str:
    return _run(["debugfs", "-R", request, str(disk)], f"debugfs {request!r} on {disk}", 60)


def boot_files(disk: Path) -> set[str]:
    """File names in /boot of `disk` (debugfs `ls -p` lines: /inode/mode/uid/gid/name/size/)."""
    lines = _debugfs(disk, "ls -p /boot").splitlines()
    return {line.split("/")[5] for line in lines if line.count("/") >= 6}


def boot_entries(disk: Path, files: set[str] | None = None) -> list[str]:
    """Kernel releases in /boot of `disk`, newest first (`sort -V`, as grub-mkconfig orders
    its menu)."""
    names = boot_files(disk) if files is None else files
    releases = [f.removeprefix("vmlinuz-") for f in names if f.startswith("vmlinuz-")]
    if not releases:
        raise RuntimeError(f"{disk}: no /boot/vmlinuz-* to boot")
    done = subprocess.run(["sort", "-V", "-r"], input="\n".join(releases) + "\n",
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class DiskVM:
    """One guest on a sparse copy of the cached image in `workdir`; `with DiskVM(d) as vm:`
    boots it and waits for SSH, and leaving the block powers it off."""

    def __init__(self, workdir: Path, memory_mb: int = 2048, cpus: int = 2) -> None:
        self.workdir = workdir
        self.disk = workdir / "disk.img"
        self.memory_mb, self.cpus = memory_mb, cpus
        self.port = free_port()
        self.known_hosts = workdir / "known_hosts"
        self.boots: list[str] = []  # the release of every boot, in order
        self.accel = "kvm" if kvm.answer().usable is True else "tcg"
        self._stop = threading.Event()
        self._qemu: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def __enter__(self) -> DiskVM:
        self.workdir.mkdir(parents=True, exist_ok=True)
        _run(["cp", "--sparse=always", str(ensure_image()), str(self.disk)], "copy the image")
        host_key = _debugfs(self.disk, "cat /etc/ssh/ssh_host_ed25519_key.pub").split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_key[0]} {host_key[1]}\n")
        self._thread = threading.Thread(target=self._supervise, name="diskvm", daemon=True)
        self._thread.start()
        self.wait_ssh(timeout=600)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._qemu is not None and self._qemu.poll() is None:
            self.ssh("systemctl poweroff", check=False, timeout=20)
            try:
                self._qemu.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._qemu.kill()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _qemu_argv(self, release: str, initrd: bool) -> list[str]:
        kernel, ramdisk = self.workdir / f"vmlinuz-{release}", self.workdir / f"initrd-{release}"
        _debugfs(self.disk, f"dump /boot/vmlinuz-{release} {kernel}")
        argv = ["qemu-system-x86_64", "-machine", f"q35,accel={self.accel}", "-cpu",
                "host" if self.accel == "kvm" else "max", "-smp", str(self.cpus), "-m",
                str(self.memory_mb), "-no-reboot", "-display", "none", "-monitor", "none",
                "-serial", f"file:{self.workdir / f'console-{len(self.boots)}.log'}",
                "-kernel", str(kernel), "-append", BOOT_LINE,
                "-drive", f"file={self.disk},format=raw,if=virtio,cache=unsafe",
                "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.port}-:22",
                "-device", "virtio-net-pci,netdev=n0"]  # fmt: skip
        if initrd:
            _debugfs(self.disk, f"dump /boot/initrd.img-{release} {ramdisk}")
            argv += ["-initrd", str(ramdisk)]
        return argv

    def _supervise(self) -> None:
        """Boot, and after every reboot (QEMU exits) boot the boot loader's choice again."""
        try:
            while not self._stop.is_set():
                files = boot_files(self.disk)
                release = boot_entries(self.disk, files)[0]
                argv = self._qemu_argv(release, f"initrd.img-{release}" in files)
                self.boots.append(release)
                self._qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
                self._qemu.wait()
        except (RuntimeError, OSError) as err:
            self.error = str(err)

    def ssh_argv(self) -> list[str]:
        return ["ssh", "-i", str(key_path()), "-p", str(self.port), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "ConnectTimeout=10", "root@127.0.0.1"]  # fmt: skip

    def ssh(self, command: str, check: bool = True, timeout: float = 120) -> str:
        done = subprocess.run([*self.ssh_argv(), command], capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
        if check and done.returncode != 0:
            err = done.stderr.strip()
            raise RuntimeError(f"disk VM: {command!r} exit {done.returncode}: {err}")
        return done.stdout

    def wait_ssh(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.error:
                raise RuntimeError(f"disk VM: {self.error}")
            try:
                if self._answers():
                    return
            except subprocess.TimeoutExpired:
                pass
            time.sleep(3)
        console = self.workdir / f"console-{len(self.boots) - 1}.log"
        raise TimeoutError(f"disk VM: no SSH on port {self.port} in {timeout:.0f} s ({console})")

    def _answers(self) -> bool:
        done = subprocess.run([*self.ssh_argv(), "true"], capture_output=True, timeout=20,
                              check=False)  # fmt: skip
        return done.returncode == 0

    def inventory_vars(self) -> dict[str, str]:
        """The host's variables in an Ansible inventory: SSH to the port forward, key checked."""
        return {
            "ansible_host": "127.0.0.1",
            "ansible_port": str(self.port),
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(key_path()),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts} "
            "-o StrictHostKeyChecking=yes",
            "ansible_python_interpreter": "/usr/bin/python3",
        }


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser("python -m mprig.rig.diskvm", description=__doc__,
                                     formatter_class=raw)  # fmt: skip
    parser.add_argument("command", choices=["image", "boot"])
    args = parser.parse_args(argv)
    if args.command == "image":
        print(ensure_image())
        return 0
    with tempfile.TemporaryDirectory(prefix="diskvm-") as tmp, DiskVM(Path(tmp)) as vm:
        print(" ".join(vm.ssh_argv()), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
