"""mprig's BPF congestion controls built on the host for the kernel the VM boots, before it
boots. The guest builds them itself when they are missing (mprig.stack.bpfcc), but under
software emulation that took 130 s for five programs on a fresh machine (clang 20-40 s
each) where the host takes about a second each. The objects go where the guest looks
(vm.bpf_cache()/<release>/), against a vmlinux.h from the guest kernel's own BTF, taken
from its image: the same header the guest would make, so the guest finds them fresh.

Best effort: a kernel image this cannot read (another compression, no BTF) or missing
build tools leave the build to the guest, as before. Here in the stack stage, not beside
the VM code in rig/: building a congestion control is the stack's business, and rig/ imports
no later stage (docs/architecture.md); callers build first, then boot (`for_vm`).
"""

from __future__ import annotations

import lzma
import struct
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from mprig.errors import MprigError
from mprig.rig import vm
from mprig.rig.vmprobe import find_kernel
from mprig.stack import bpfcc

# bzImage: the setup header's "HdrS" at 0x202; kernel_version (0x20E) points at the version
# string, 0x200 bytes further on (Documentation/arch/x86/boot.rst).
_HDRS_AT, _VERSION_PTR_AT, _SETUP_BASE = 0x202, 0x20E, 0x200
_XZ, _GZIP = b"\xfd7zXZ\x00", b"\x1f\x8b\x08\x00"


def kernel_release(image: bytes) -> str | None:
    """The release (`6.1.0-57-amd64`) a bzImage was built as, or None."""
    if image[_HDRS_AT : _HDRS_AT + 4] != b"HdrS":
        return None
    (pointer,) = struct.unpack_from("<H", image, _VERSION_PTR_AT)
    start = pointer + _SETUP_BASE
    end = image.find(b"\0", start, start + 256)
    if pointer == 0 or end < 0:
        return None
    words = image[start:end].decode("ascii", "replace").split()
    return words[0] if words else None


def vmlinux(image: bytes) -> bytes | None:
    """The vmlinux ELF inside a bzImage compressed with xz or gzip, or None."""
    for magic, decompress in ((_XZ, _unxz), (_GZIP, _gunzip)):
        at = image.find(magic)
        while at >= 0:
            elf = decompress(image[at:])
            if elf is not None and elf[:4] == b"\x7fELF":
                return elf
            at = image.find(magic, at + 1)
    return None


def _unxz(data: bytes) -> bytes | None:
    try:
        return lzma.LZMADecompressor().decompress(data)
    except lzma.LZMAError:
        return None


def _gunzip(data: bytes) -> bytes | None:
    try:  # one gzip member; what follows it in the image is left alone
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
    except zlib.error:
        return None


def for_vm(names: Iterable[str], say: Callable[[str], None] | None = None) -> list[str]:
    """Build those of `names` that are mprig BPF programs for the kernel VM mode boots, into
    the cache the guest reads (vm.bpf_cache()), before run_in_vm or VmSession boots it;
    returns the names built. Nothing when there is no cache or no kernel image (the boot
    says so itself)."""
    names = list(names)
    cache = vm.bpf_cache()
    if cache is None or not names:
        return []
    try:
        kernel = find_kernel()
    except MprigError:
        return []
    return prebuild(kernel, cache, names, say or _say)


def _say(text: str) -> None:
    print(f"mprig: {text}", file=sys.stderr, flush=True)


def prebuild(
    kernel: Path, cache: Path, names: Iterable[str], say: Callable[[str], None]
) -> list[str]:
    """Build those of `names` that are mprig BPF programs and stale into cache/<the kernel's
    release>/ against that kernel's BTF; returns the names built (none when all were
    fresh). Problems are said and left to the guest."""
    try:
        image = kernel.read_bytes()
    except OSError as e:
        say(f"BPF congestion controls: cannot read {kernel} ({e.strerror}); the VM builds them")
        return []
    release = kernel_release(image)
    if release is None:
        return []
    out_dir = cache / release
    stale = [n for n in bpfcc.bpf_names(names) if bpfcc.stale(out_dir, n)]
    if not stale:
        return []
    say(f"building {len(stale)} BPF congestion controls for the VM's kernel {release} on the"
        " host (the VM would take about half a minute each)")  # fmt: skip
    try:
        with tempfile.NamedTemporaryFile(prefix="mprig-vmlinux-") as btf:
            if not (out_dir / "vmlinux.h").exists():  # else kept, and btf never read
                elf = vmlinux(image)
                if elf is None:
                    return []  # compressed another way: the guest makes its header itself
                btf.write(elf)
                btf.flush()
            bpfcc.build(stale, out_dir=out_dir, btf=Path(btf.name))
    except MprigError as e:
        say(f"BPF congestion controls not built on the host ({e}); the VM builds them")
        return []
    return stale
