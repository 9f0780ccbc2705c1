"""Whether VM mode may use KVM here, and why.

KVM counts as usable only when a guest booted with it reached userspace and ran a command
within a deadline: on some hosts QEMU aborts with KVM ("failed to set MSR"), on others it
stays up while the guest never boots. Opening /dev/kvm proves neither.

The answer comes, in this order, from:
1. an override: `mprig run --kvm/--no-kvm`, or MPRIG_KVM=1/0 in the environment;
2. the cache CACHE_DIR/kvm.json, valid while its key matches this host (kernel release,
   QEMU version, /dev/kvm device numbers), so an upgrade makes mprig probe again;
3. otherwise nobody knows yet: the next VM boot tries KVM under a short boot deadline and
   records the outcome (vm.run_in_vm), or `mprig doctor --probe-kvm` boots a guest to find
   out.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

KVM_ENV = "MPRIG_KVM"  # 1: use KVM, 0: never (overrides the cache)
KVM_DEVICE = Path("/dev/kvm")


def cache_dir() -> Path:
    """Where mprig keeps machine-wide answers (MPRIG_CACHE, default /var/cache/mprig)."""
    return Path(os.environ.get("MPRIG_CACHE", "/var/cache/mprig"))


@dataclass(frozen=True)
class KvmAnswer:
    """What mprig knows about KVM on this host."""

    usable: bool | None  # None: not known yet (the next boot tries KVM and records it)
    reason: str  # for people: why, and where the answer comes from
    source: str  # "override", "cache", "device" or "unknown"


def host_key() -> str:
    """What can change the answer: kernel release, QEMU version, the /dev/kvm device."""
    try:
        st = KVM_DEVICE.stat()
        device = f"kvm {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    except OSError:
        device = "no /dev/kvm"
    return f"{os.uname().release} | {qemu_version()} | {device}"


def qemu_version() -> str:
    """First line of `qemu-system-x86_64 --version`, or "none"."""
    if shutil.which("qemu-system-x86_64") is None:
        return "none"
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        out = subprocess.run(
            ["qemu-system-x86_64", "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout
        return out.splitlines()[0] if out else "unknown"
    return "unknown"


def answer() -> KvmAnswer:
    """The override, else the cached probe result for this host, else unknown."""
    override = os.environ.get(KVM_ENV, "").strip().lower()
    if override in ("1", "yes", "true", "on"):
        return KvmAnswer(True, f"{KVM_ENV}={override} (or --kvm) given", "override")
    if override in ("0", "no", "false", "off"):
        return KvmAnswer(False, f"{KVM_ENV}={override} (or --no-kvm) given", "override")
    if not os.access(KVM_DEVICE, os.R_OK | os.W_OK):
        return KvmAnswer(False, f"{KVM_DEVICE} is missing or not accessible", "device")
    cached = _read_cache()
    if cached is not None:
        return cached
    return KvmAnswer(None, "not probed on this host yet: the first boot tries KVM", "unknown")


def _read_cache() -> KvmAnswer | None:
    try:
        data = json.loads((cache_dir() / "kvm.json").read_text())
        if data["key"] != host_key():
            return None
        usable, reason = bool(data["usable"]), str(data.get("reason", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    when = data.get("probed_at", "?")
    said = "usable" if usable else f"unusable here: {_short(reason)}"
    return KvmAnswer(usable, f"KVM {said} (probed {when}, {cache_dir() / 'kvm.json'})", "cache")


def _short(reason: str, limit: int = 160) -> str:
    """The first line of QEMU's complaint, enough to recognise it."""
    first = reason.split(" | ")[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


def record(usable: bool, reason: str) -> None:
    """Cache what a boot proved, keyed to this host (best effort: a read-only cache dir
    only means the next campaign finds out again)."""
    import time

    doc = {
        "key": host_key(),
        "usable": usable,
        "reason": reason,
        "probed_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    path = cache_dir() / "kvm.json"
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".kvm.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, path)
