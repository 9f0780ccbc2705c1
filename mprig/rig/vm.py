"""VM mode: run mprig inside a virtme-ng VM booting the distribution's stock kernel.

Used where the running kernel lacks sch_netem (or mac80211_hwsim). The VM shares the host's
root filesystem read-only (so the venv and the project are there) plus the `rwdirs`
read-write. Inside the VM:

- PATH starts with the venv's bin directory, then the usual sbin/bin directories;
- the current directory is the host's current directory (read-only unless an rwdir);
- /tmp and /run are the VM's own, writable; HOME is /tmp;
- the hostname is `mprig-vm`, and MPRIG_IN_VM=1 is set (so `mprig run` stays native there);
- MPRIG_BPF_CACHE names a host directory mounted read-write (bpf_cache), where the guest
  keeps the BPF congestion controls it builds from one boot to the next.

vng does not reliably propagate the exit status of the command it runs, so the guest
writes the status into a file in a shared directory and `run_in_vm` returns that.

Deciding whether to boot at all is mprig.rig.vmprobe; one VM for many commands is
mprig.rig.vmsession.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from mprig.errors import MprigError, ToolMissing, UsageError
from mprig.rig import kvm, vmboot
from mprig.rig.vmprobe import IN_VM_ENV, find_kernel
from mprig.rig.vmprobe import acceleration as acceleration  # run.py reads vm.acceleration()
from mprig.rig.vmshares import fit_shares, shares_for
from mprig.tools import which

VM_HOSTNAME = "mprig-vm"
# The guest's memory. Its /tmp (an overlay on a tmpfs of half the memory) holds a run's
# captures twice while they are fetched and joined (three times before the fetch streamed its
# tar): 2G ran out on one run of paper 004's Fig. 6(c) (three 100 Mbit/s links, 60 s; 353 MB
# bundles). MPRIG_VM_MEMORY=8G for more.
VM_MEMORY_DEFAULT = "4G"
VM_MEMORY_ENV = "MPRIG_VM_MEMORY"


def vm_memory() -> str:
    """The guest's memory: MPRIG_VM_MEMORY (e.g. 6G, 3072M) or VM_MEMORY_DEFAULT."""
    value = os.environ.get(VM_MEMORY_ENV, "").strip() or VM_MEMORY_DEFAULT
    if not re.fullmatch(r"[1-9][0-9]*[MG]", value):
        raise UsageError(f"{VM_MEMORY_ENV}={value!r}: give a size such as 4G or 3072M")
    return value


SHARE_ROOT = Path("/var/tmp")  # per-VM exchange dirs (the guest's writes to /tmp stay in it)
# Boot deadlines: a KVM guest is up in seconds, a software-emulated one in 25-50 s on an
# idle 2-core machine; MPRIG_VM_KVM_BOOT_TIMEOUT / MPRIG_VM_BOOT_TIMEOUT override them.
KVM_BOOT_TIMEOUT = 60.0
BOOT_TIMEOUT = 300.0
STALE_AFTER = 180.0  # seconds without a guest heartbeat (MPRIG_VM_STALE_AFTER)
BOOT_LOCK = Path("/tmp/mprig-vm.lock")  # one VM at a time on this machine


def vng_path() -> str:
    """The vng executable: MPRIG_VNG, else next to this Python (the venv), else on PATH."""
    if os.environ.get("MPRIG_VNG"):
        return os.environ["MPRIG_VNG"]
    found = which("vng")
    if not found:
        raise ToolMissing("vng not found: pip install virtme-ng (make setup installs it)")
    return found


def kvm_usable() -> bool:
    """Whether the next boot uses KVM (unknown counts as yes: the boot then proves it)."""
    return kvm.answer().usable is not False


def probe_kvm(deadline: float | None = None) -> kvm.KvmAnswer:
    """Boot a guest with KVM that runs `true`; record and return what that proved."""
    limit = deadline or vmboot.env_seconds("MPRIG_VM_KVM_BOOT_TIMEOUT", KVM_BOOT_TIMEOUT)
    share = new_share()
    try:
        (share / "run.sh").write_text(_guest_script(["true"], share / "status", share))
        argv = _vng_argv(share, [], f"sh {share / 'run.sh'}", "512M", 1, use_kvm=True)
        with boot_lock():
            _attempt(argv, share, limit, None, None, None, _quiet, "KVM probe")
        ok = (share / "status").exists()
        why = "a guest booted with KVM and ran a command" if ok else "the guest's command failed"
    except vmboot.BootFailed as e:
        ok, why = False, str(e)
    finally:
        shutil.rmtree(share, ignore_errors=True)
    kvm.record(ok, why)
    return kvm.answer()


def _quiet(_text: str) -> None:
    pass


def _host_env() -> dict[str, str]:
    """Our environment with the venv's bin first on PATH (vng calls virtme-run from PATH)."""
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{venv_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def _guest_path() -> str:
    venv_bin = str(Path(sys.executable).parent)
    return f"{venv_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _code_dirs() -> list[str]:
    """What the guest runs mprig from: the Python environment and the source tree (an
    editable install), shared when they lie where the guest mounts afresh (a clone in
    /var/tmp)."""
    return [sys.prefix, str(Path(__file__).resolve().parents[2])]


def _vng_argv(
    share: Path,
    rwdirs: Sequence[Path],
    exec_cmd: str,
    memory: str,
    cpus: int,
    *,
    use_kvm: bool,
) -> list[str]:
    argv = [vng_path(), "--run", str(find_kernel()), "--name", VM_HOSTNAME]
    if not use_kvm:
        argv.append("--disable-kvm")
    argv += ["--memory", memory, "--cpus", str(cpus), "--cwd", os.getcwd()]
    for d in [share, *rwdirs]:
        argv += ["--rwdir", str(Path(d).resolve())]
    return [*argv, "--exec", exec_cmd]


# virtme-ng gives the guest a generated /etc/shadow with every account locked ("!"); sshd
# without PAM refuses locked accounts even for key logins, which would lock the virtual
# rig's Ansible and runner out. Unlock root in the guest's throwaway copy only (the
# hostname check keeps a stand-in vng that runs the script on the host away from it).
UNLOCK_ROOT = (
    f'if [ "$(hostname)" = {VM_HOSTNAME} ] && grep -q "^root:!" /etc/shadow 2>/dev/null; then '
    "s=$(sed 's/^root:[^:]*:/root:*:/' /etc/shadow) && printf '%s\\n' \"$s\" > /etc/shadow; fi"
)


def bpf_cache() -> Path | None:
    """The host directory the guest builds mprig's BPF congestion controls into, mounted
    read-write (MPRIG_BPF_CACHE, else <MPRIG_CACHE>/bpf; None when it cannot be made). The
    guest's own /tmp is gone after each boot, and under emulation each build costs about
    half a minute of clang: with the objects kept here (per kernel release, rebuilt only when
    stale, mprig.stack.bpfcc) only the first VM campaign on a machine builds them."""
    path = Path(os.environ.get("MPRIG_BPF_CACHE") or kvm.cache_dir() / "bpf")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def _guest_script(
    argv: Sequence[str], status_file: Path, share: Path, bpf: Path | None = None
) -> str:
    """Shell script the guest runs: readiness line, heartbeats, environment, the command,
    then its exit status."""
    env = {IN_VM_ENV: "1", "PATH": _guest_path(), "HOME": "/tmp"}
    if bpf is not None:
        env["MPRIG_BPF_CACHE"] = str(bpf)
    beat = shlex.quote(str(share / vmboot.HEARTBEAT_FILE))
    marker = vmboot.READY_MARKER.decode()
    lines = ["#!/bin/sh", f"echo {marker}", f"echo {marker} >&2"]  # each pipe's own
    lines += [
        f"(while :; do cat /proc/uptime > {beat}.tmp && mv -f {beat}.tmp {beat}; "
        f"sleep {vmboot.HEARTBEAT_S}; done) </dev/null >/dev/null 2>&1 &",
        "mprig_heartbeat=$!",
        "mkdir -p /run/mprig /run/sshd /var/cache/mprig 2>/dev/null",
        UNLOCK_ROOT,
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines += [f"cd {shlex.quote(os.getcwd())}", shlex.join(argv), "mprig_status=$?"]
    lines.append('kill "$mprig_heartbeat" 2>/dev/null')
    lines.append(f'echo "$mprig_status" > {shlex.quote(str(status_file))}')
    return "\n".join(lines) + "\n"


def new_share() -> Path:
    """A fresh exchange directory the VM mounts read-write (status, heartbeats, queue)."""
    SHARE_ROOT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="mprig-vm-", dir=SHARE_ROOT))


def ancestors() -> set[int]:
    """This process and every process above it, up to init."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def _lock_held_by_ancestor(lock: Path) -> bool:
    """True when we or an ancestor (`flock LOCK our-command`) already hold the boot lock."""
    try:
        ino = os.stat(lock).st_ino
        locks = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    holders = {
        int(f[4])
        for f in (ln.split() for ln in locks)
        if len(f) > 5 and f[4].isdigit() and f[5].rsplit(":", 1)[-1] == str(ino)
    }
    return bool(holders & ancestors())


@contextlib.contextmanager
def boot_lock(lock: Path | None = None) -> Iterator[None]:
    """Serialize VM boots machine-wide (flock); a no-op when an ancestor already holds it.
    The lock is BOOT_LOCK unless MPRIG_VM_BOOT_LOCK names another file."""
    lock = lock or Path(os.environ.get("MPRIG_VM_BOOT_LOCK") or BOOT_LOCK)
    if _lock_held_by_ancestor(lock):
        yield
        return
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"mprig: waiting for another VM to finish ({lock})", file=sys.stderr)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_in_vm(
    argv: list[str],
    rwdirs: list[Path],
    *,
    memory: str | None = None,
    cpus: int = 2,
    timeout: float | None = None,
    console: Path | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> int:
    """Boot one VM, run argv inside, return argv's exit status.

    The guest's stdout and stderr reach ours (or `console` if given) once it is up; QEMU
    never writes to our descriptors. A boot with KVM that does not reach userspace within
    its deadline is stopped and retried with software emulation (unless KVM was forced),
    and the outcome is cached (mprig.rig.kvm). `timeout`: seconds for the whole run once
    booted (None: no limit but the guest's heartbeats). VM boots are serialized
    machine-wide with a lock on /tmp/mprig-vm.lock. mprig BPF congestion controls the
    guest will load are built on the host first by the caller (mprig.stack.vmbpf.for_vm).
    """
    tell = say or _say
    memory = memory or vm_memory()
    share = new_share()
    bpf = bpf_cache()
    try:
        status = share / "status"
        (share / "run.sh").write_text(_guest_script(argv, status, share, bpf))
        exec_cmd = f"sh {share / 'run.sh'}"
        rwdirs = fit_shares([*rwdirs, *([bpf] if bpf else []), *shares_for([], _code_dirs())])
        with boot_lock():
            rc = _boot(share, rwdirs, exec_cmd, (memory, cpus), timeout, console, on_start, tell)
        if not status.exists():
            raise MprigError(
                f"the VM exited (vng status {rc}) before {argv[0]} finished; "
                "rerun with --no-vm to see whether the command itself fails"
            )
        return int(status.read_text().strip() or "1")
    finally:
        shutil.rmtree(share, ignore_errors=True)


def _say(text: str) -> None:
    print(f"mprig: {text}", file=sys.stderr, flush=True)


def _boot(
    share: Path,
    rwdirs: Sequence[Path],
    exec_cmd: str,
    size: tuple[str, int],
    timeout: float | None,
    console: Path | None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None,
    say: Callable[[str], None],
) -> int:
    """Boot with KVM unless it is known not to work, else (or after a failed KVM boot)
    with software emulation."""
    answer = kvm.answer()
    if answer.usable is not False:
        argv = _vng_argv(share, rwdirs, exec_cmd, *size, use_kvm=True)
        limit = vmboot.env_seconds("MPRIG_VM_KVM_BOOT_TIMEOUT", KVM_BOOT_TIMEOUT)
        say(f"booting the VM with KVM ({answer.reason}); giving up after {limit:.0f} s")
        try:
            rc = _attempt(argv, share, limit, timeout, console, on_start, say, "KVM")
        except vmboot.BootFailed as e:
            if answer.source == "override":
                raise MprigError(f"{e}; KVM was forced (--kvm or {kvm.KVM_ENV}=1)") from None
            kvm.record(False, str(e))
            say(f"KVM is not usable here: {e}; booting again with software emulation")
            answer = kvm.KvmAnswer(False, "KVM unusable here, see above", "probe")
        else:
            if answer.usable is None:
                kvm.record(True, "a guest booted with KVM and ran a command")
            return rc
    argv = _vng_argv(share, rwdirs, exec_cmd, *size, use_kvm=False)
    limit = vmboot.env_seconds("MPRIG_VM_BOOT_TIMEOUT", BOOT_TIMEOUT)
    say(
        f"booting the VM with software emulation ({answer.reason}): usually 25-50 s, "
        f"giving up after {limit:.0f} s"
    )
    return _attempt(argv, share, limit, timeout, console, on_start, say, "software emulation")


def _attempt(
    vng: list[str],
    share: Path,
    boot_deadline: float,
    timeout: float | None,
    console: Path | None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None,
    say: Callable[[str], None],
    how: str,
) -> int:
    """One boot: vng on pipes of its own, watched by vmboot (readiness, heartbeats)."""
    (share / vmboot.HEARTBEAT_FILE).unlink(missing_ok=True)  # left by a failed KVM boot
    log_path = console or share / "console.log"
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(log_path, "ab"))
        proc = subprocess.Popen(
            vng,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=_host_env(),
        )
        stack.callback(_stop_watchdog, kill_group_with_parent(proc.pid))
        assert proc.stdout is not None and proc.stderr is not None
        out = vmboot.Console(log, to_log_only=console is not None)
        out.start(proc.stdout, proc.stderr)
        if on_start:
            on_start(proc)
        stale_after = vmboot.env_seconds("MPRIG_VM_STALE_AFTER", STALE_AFTER)
        watch = vmboot.Watch(
            share,
            boot_deadline=boot_deadline,
            stale_after=stale_after,
            timeout=timeout,
            say=say,
            how=how,
        )
        return vmboot.supervise(proc, out, watch)


_WATCHDOG = (
    'while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done; '
    'kill -0 "$1" 2>/dev/null || kill -KILL "-$2" 2>/dev/null'
)


def kill_group_with_parent(pgid: int) -> subprocess.Popen[bytes]:
    """Watch this process; if it dies (even by kill -9), SIGKILL process group `pgid`.

    The VM runs in a session of its own (so a Ctrl-C reaches the runner, which tears the
    run down first); without this watchdog a killed runner would leave QEMU running. The
    watchdog ends by itself when the group's leader exits.
    """
    return subprocess.Popen(
        ["sh", "-c", _WATCHDOG, "mprig-vm-watchdog", str(os.getpid()), str(pgid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop_watchdog(watchdog: subprocess.Popen[bytes]) -> None:
    watchdog.kill()
    watchdog.wait()
