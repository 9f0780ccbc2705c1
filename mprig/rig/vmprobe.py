"""Mode choice for the virtual rig: native or VM, from what the running kernel offers.

Probes (netem, tbf, mac80211_hwsim, the kernel image VM mode boots) and the decision
that `mprig run` and `mprig doctor` share; kept apart from mprig.rig.vm, which boots the VM,
so deciding never pulls in the boot machinery.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path

from mprig.errors import MprigError, ToolMissing

IN_VM_ENV = "MPRIG_IN_VM"


def in_vm() -> bool:
    """True inside a VM started by this module."""
    return os.environ.get(IN_VM_ENV) == "1"


CLOCKSOURCES = Path("/sys/devices/system/clocksource/clocksource0/available_clocksource")


def acceleration(clocksources: Path = CLOCKSOURCES) -> str:
    """How the campaign VM runs, seen from inside it: "kvm" when the guest has KVM's
    paravirtual clock (a KVM guest always offers kvm-clock, an emulated one never does),
    else "software emulation"; "native" outside a VM."""
    if not in_vm():
        return "native"
    try:
        return "kvm" if "kvm-clock" in clocksources.read_text().split() else "software emulation"
    except OSError:
        return "unrecorded"


def _run_quiet(argv: Sequence[str], timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)


def netem_available() -> bool:
    """Whether a netem qdisc can be added (probed in a throwaway namespace)."""
    return _qdisc_probe("netem", ["delay", "1ms"])


def tbf_available() -> bool:
    """Whether a tbf qdisc can be added (probed in a throwaway namespace)."""
    return _qdisc_probe("tbf", ["rate", "1mbit", "burst", "32kb", "latency", "50ms"])


def _qdisc_probe(kind: str, args: list[str]) -> bool:
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return False
    ns = f"mprig-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    if _run_quiet(["ip", "netns", "add", ns]).returncode != 0:
        return False
    try:
        _run_quiet(
            [
                "ip",
                "-n",
                ns,
                "link",
                "add",
                "name",
                "probe0",
                "type",
                "veth",
                "peer",
                "name",
                "probe1",
            ]
        )
        tc = ["tc", "-n", ns, "qdisc", "add", "dev", "probe0", "root", kind, *args]
        return _run_quiet(tc).returncode == 0
    finally:
        _run_quiet(["ip", "netns", "delete", ns])


def hwsim_available() -> bool:
    """Whether mac80211_hwsim is built in, loaded, or loadable."""
    if Path("/sys/module/mac80211_hwsim").exists():
        return True
    if shutil.which("modprobe") is None or not Path("/proc/modules").exists():
        return False  # no loadable module support on this kernel
    return _run_quiet(["modprobe", "-n", "-q", "mac80211_hwsim"]).returncode == 0


def _version_key(path: Path) -> tuple[object, ...]:
    parts = re.split(r"(\d+)", path.name.removeprefix("vmlinuz-"))
    return tuple(int(p) if p.isdigit() else p for p in parts if p)


VM_KERNEL_ENV = "MPRIG_VM_KERNEL"  # a kernel image VM mode boots instead of /boot's newest


def chosen_kernel(path: str) -> Path:
    """The image `mprig run --kernel` (or MPRIG_VM_KERNEL) names; checked before any boot so
    a typo fails here, not as a vng error after the campaign lock is taken."""
    image = Path(path).expanduser().resolve()
    if not image.is_file():
        raise MprigError(
            f"kernel image {path} does not exist (--kernel or {VM_KERNEL_ENV}): "
            "`make kernel-vm` builds /var/cache/mprig/kernel-vm/bzImage"
        )
    return image


def find_kernel(boot: Path = Path("/boot")) -> Path:
    """The kernel VM mode boots: MPRIG_VM_KERNEL when set (the VM lab's patched bzImage),
    else the newest image under /boot (the distribution's stock kernel)."""
    if os.environ.get(VM_KERNEL_ENV):
        return chosen_kernel(os.environ[VM_KERNEL_ENV])
    images = sorted(boot.glob("vmlinuz-*"), key=_version_key)
    if not images:
        raise ToolMissing(
            f"no kernel image in {boot} for VM mode: apt-get install linux-image-amd64"
        )
    return images[-1]


def choose_mode(requested: str = "auto", *, hwsim: bool = False) -> tuple[str, str]:
    """Decide between "native" and "vm" rig mode; returns (mode, human-readable reason).
    `hwsim`: the rig needs mac80211_hwsim radios as well as netem."""
    release = os.uname().release
    if in_vm():
        return "native", f"inside the campaign VM (kernel {release})"
    if requested == "native":
        return "native", "--no-vm given"
    if requested == "vm":
        return "vm", f"--vm given: boots {find_kernel()}"
    if requested != "auto":
        raise MprigError(f"rig mode must be auto, native or vm, got {requested!r}")
    missing = [] if netem_available() else ["sch_netem"]
    if hwsim and not hwsim_available():
        missing.append("mac80211_hwsim")
    if missing:
        what = " and ".join(missing) + (" are" if len(missing) > 1 else " is")
        return "vm", f"{what} missing on the running kernel {release}: boots {find_kernel()}"
    what = "sch_netem and mac80211_hwsim are" if hwsim else "sch_netem is"
    return "native", f"{what} available on the running kernel {release}"
