"""The papers' congestion controls as BPF programs (struct_ops `tcp_congestion_ops`).

Sources live in kernel-configs/bpf/<name>.c; each registers a kernel algorithm of the same
name. `build` compiles them with clang against a vmlinux.h generated from the running
kernel's BTF (/sys/kernel/btf/vmlinux) into a cache directory; `ensure_loaded` registers
them with `bpftool struct_ops register`, after which the name is in
net.ipv4.tcp_available_congestion_control for every network namespace on the machine.
The objects are CO-RE: built once, they load on any kernel with BTF and struct_ops (5.6+).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from mprig import datafiles, tools
from mprig.errors import MprigError, ToolMissing

SOURCE_DIR = datafiles.KERNEL_CONFIGS / "bpf"
BTF = Path("/sys/kernel/btf/vmlinux")
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")

PROGRAMS: Mapping[str, str] = MappingProxyType(
    {
        "prr": "PR-R (paper 000): fast recovery keeps cwnd; RTO as Reno",
        "door": "TCP-DOOR (papers 000, 003): no congestion response for one RTT after "
        "reordering is detected",
        "lia": "RFC 6356 LIA (the papers' Co-CC): coupled increase across an MPTCP "
        "connection's subflows",
        "cwa": "CWA-MPTCP (paper 001 Algorithm 1): LIA, and every 0.5 s the slowest "
        "subflow's cwnd divided by the delay ratio",
        "olia": "OLIA (Khalili et al.): coupled increase that moves window from the largest "
        "subflows to those with the best loss interval per RTT",
        "fccc": "fully coupled (the papers' FC-CC): each packet acked adds 1/cwnd_total, a "
        "loss takes half of cwnd_total from the subflow",
        "prr_lia": "PR-R's recovery (prr) over LIA's coupled increase, as paper 000 ran it",
        "door_lia": "TCP-DOOR's responses (door) over LIA's coupled increase",
        "door_fccc": "TCP-DOOR's responses (door) over FC-CC's fully coupled decrease and "
        "increase (fccc), as paper 003's TCP-DOOR rows under FC-CC",
    }
)

# tool -> Debian package that provides it
TOOLS: Mapping[str, str] = MappingProxyType({"clang": "clang", "bpftool": "bpftool"})
HEADERS: Mapping[str, str] = MappingProxyType({"bpf/bpf_helpers.h": "libbpf-dev"})
INCLUDE_DIRS = (Path("/usr/include"), Path("/usr/local/include"))


@dataclass(frozen=True)
class Loadable:
    """Whether one BPF program can be loaded on this machine, and why not."""

    name: str  # the algorithm name (kernel-configs/bpf/<name>.c)
    ok: bool  # builds and loads here (or is already loaded)
    detail: str  # "loaded", "loadable", or what is missing and how to get it


def available() -> tuple[str, ...]:
    """The BPF algorithms mprig ships (those with a source in kernel-configs/bpf)."""
    return tuple(n for n in PROGRAMS if (SOURCE_DIR / f"{n}.c").exists())


def bpf_names(names: Iterable[str]) -> list[str]:
    """The names (in order, once each) that are mprig BPF algorithms."""
    return [n for n in dict.fromkeys(names) if n in PROGRAMS]


def cache_dir() -> Path:
    """Where objects are built, per kernel release (vmlinux.h differs between kernels):
    $MPRIG_BPF_CACHE, else ~/.cache/mprig/bpf, else (read-only home, as in the VM) /tmp."""
    if os.environ.get("MPRIG_BPF_CACHE"):
        return Path(os.environ["MPRIG_BPF_CACHE"]) / os.uname().release
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    if not _writable(cache):
        cache = Path("/tmp", f"mprig-cache-{os.getuid()}")
    return cache / "mprig" / "bpf" / os.uname().release


def _writable(path: Path) -> bool:
    """Whether path, or its nearest existing ancestor, is writable by us."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return os.access(path, os.W_OK)


def clang_argv(source: Path, obj: Path, include: Path) -> list[str]:
    """The clang command that compiles one program to a CO-RE BPF object."""
    return [
        "clang",
        "-target",
        "bpf",
        "-mcpu=v3",  # atomics (cwa's compare-and-swap): kernel 5.12+
        "-O2",
        "-g",
        "-Wall",
        "-Werror",
        f"-I{include}",
        f"-I{source.parent}",
        "-c",
        str(source),
        "-o",
        str(obj),
    ]


def stale(out_dir: Path, name: str) -> bool:
    """Whether out_dir/<name>.o needs building: missing, or older than its source, the
    shared headers, out_dir's vmlinux.h (missing counts as newer) or this module (a change
    of clang's flags rebuilds)."""
    header = out_dir / "vmlinux.h"
    if not header.exists():
        return True
    inputs = [SOURCE_DIR / f"{name}.c", header, *SOURCE_DIR.glob("*.h"), Path(__file__)]
    return is_stale(out_dir / f"{name}.o", inputs)


def is_stale(target: Path, inputs: Iterable[Path]) -> bool:
    """True when target is missing or older than any input (make's rule)."""
    if not target.exists():
        return True
    built = target.stat().st_mtime_ns
    return any(p.stat().st_mtime_ns > built for p in inputs)


def missing_requirements(
    which: Mapping[str, str | None], headers_found: Iterable[str], btf: bool
) -> list[str]:
    """What is missing to build and load, each naming what to install."""
    out = [f"{t} (apt-get install {pkg})" for t, pkg in TOOLS.items() if not which.get(t)]
    found = set(headers_found)
    out += [f"{h} (apt-get install {pkg})" for h, pkg in HEADERS.items() if h not in found]
    if not btf:
        out.append(f"kernel BTF {BTF} (a kernel built with CONFIG_DEBUG_INFO_BTF=y)")
    return out


def check_requirements(running_kernel: bool = True) -> None:
    """Raise ToolMissing naming every missing tool, header or kernel feature (the running
    kernel's BTF only when building for it)."""
    found = [h for h in HEADERS if any((d / h).exists() for d in INCLUDE_DIRS)]
    btf = BTF.exists() or not running_kernel
    missing = missing_requirements({t: tools.which(t) for t in TOOLS}, found, btf)
    if missing:
        raise ToolMissing(
            f"BPF congestion control needs {', '.join(missing)}; `make system` installs "
            "the packages"
        )


def _run(argv: list[str], what: str) -> str:
    tool = tools.which(argv[0]) or argv[0]
    try:
        p = subprocess.run([tool, *argv[1:]], capture_output=True, text=True, check=False)
    except OSError as e:
        raise ToolMissing(f"{what}: cannot run {argv[0]} ({e.strerror})") from None
    if p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        raise MprigError(f"{what} failed: {' | '.join(err[-3:]) or f'exit {p.returncode}'}")
    return p.stdout


def vmlinux_h(out_dir: Path, btf: Path = BTF) -> Path:
    """Generate (once per kernel release) vmlinux.h from the running kernel's BTF (or `btf`:
    another kernel's vmlinux ELF, mprig.stack.vmbpf)."""
    header = out_dir / "vmlinux.h"
    if header.exists() and header.stat().st_size > 0:
        return header
    out_dir.mkdir(parents=True, exist_ok=True)
    text = _run(["bpftool", "btf", "dump", "file", str(btf), "format", "c"], "vmlinux.h")
    tmp = header.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(header)
    return header


def build(
    names: Iterable[str], out_dir: Path | None = None, btf: Path | None = None
) -> dict[str, Path]:
    """Compile the named programs (only when stale) and return name -> object file: into
    cache_dir() against the running kernel, or into `out_dir` against the kernel whose
    vmlinux ELF `btf` is (the campaign VM's, built on the host: mprig.stack.vmbpf)."""
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in PROGRAMS]
    if unknown:
        raise MprigError(f"no BPF program {', '.join(unknown)} (known: {', '.join(PROGRAMS)})")
    check_requirements(btf is None)
    out_dir = out_dir or cache_dir()
    vmlinux_h(out_dir, btf or BTF)  # made once; stale() reads it
    objects = {}
    for name in wanted:
        source, obj = SOURCE_DIR / f"{name}.c", out_dir / f"{name}.o"
        if stale(out_dir, name):
            tmp = obj.with_suffix(f".{os.getpid()}.tmp")
            _run(clang_argv(source, tmp, out_dir), f"compiling {source}")
            tmp.replace(obj)
        objects[name] = obj
    return objects


def loaded() -> tuple[str, ...]:
    """The congestion-control algorithms the kernel has now."""
    return tuple(AVAILABLE_CC.read_text().split())


def ensure_loaded(names: Iterable[str]) -> list[str]:
    """Build and register those of `names` that are mprig BPF algorithms and not yet in
    the kernel; other names are left alone. Returns the names newly registered."""
    todo = [n for n in bpf_names(names) if n not in loaded()]
    if not todo:
        return []
    objects = build(todo)
    for name in todo:
        try:
            _run(["bpftool", "struct_ops", "register", str(objects[name])], f"loading {name}")
        except MprigError:
            if name not in loaded():  # another process may have registered it meanwhile
                raise
    return todo


def unload(names: Iterable[str]) -> None:
    """Unregister the named BPF algorithms (the map carries the algorithm's name)."""
    for name in bpf_names(names):
        if name not in loaded():
            continue
        try:
            _run(["bpftool", "struct_ops", "unregister", "name", name], f"unloading {name}")
        except MprigError:
            # An earlier map of that name, unregistered while sockets still use it, cannot be
            # unregistered again (EINPROGRESS): only the registered one matters.
            if name in loaded():
                raise


def loadable(name: str) -> Loadable:
    """Whether a program is loaded, or builds and registers here (probed: as root it is
    registered and unregistered again; for `mprig doctor`)."""
    if name in loaded():
        return Loadable(name, True, "loaded")
    try:
        build([name])
        if os.geteuid() != 0:
            return Loadable(name, True, "builds; registering needs root")
        ensure_loaded([name])
        unload([name])
    except MprigError as e:
        return Loadable(name, False, str(e))
    return Loadable(name, True, "builds and registers (loaded at campaign start)")
