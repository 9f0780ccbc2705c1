"""VM mode: run mprig inside a virtme-ng VM booting the distribution's stock kernel.

Used where the running kernel lacks sch_netem (or mac80211_hwsim). The VM shares the host's
root filesystem read-only (so the venv and the project are there) plus the `rwdirs`
read-write. Inside the VM:

- PATH starts with the venv's bin directory, then the usual sbin/bin directories;
- the current directory is the host's current directory (read-only unless an rwdir);
- /tmp and /run are the VM's own, writable; HOME is /tmp;
- the hostname is `mprig-vm`, and MPRIG_IN_VM=1 is set (so `mprig run` stays native there).

vng does not reliably propagate the exit status of the command it runs, so the guest
writes the status into a file in a shared directory and `run_in_vm` returns that.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from mprig.errors import MprigError, ToolMissing

IN_VM_ENV = "MPRIG_IN_VM"
VM_HOSTNAME = "mprig-vm"
CACHE_DIR = Path(os.environ.get("MPRIG_CACHE", "/var/cache/mprig"))
SHARE_ROOT = Path("/var/tmp")  # host directory for per-VM exchange dirs (not /tmp: VM has its own)
BOOT_TIMEOUT = 240.0  # seconds for a software-emulated boot on a busy 2-core machine
BOOT_LOCK = Path("/tmp/mprig-vm.lock")  # one VM at a time on this machine
LOCK_WAIT = 1800.0  # seconds a VmSession may wait for another VM to finish


def in_vm() -> bool:
    """True inside a VM started by this module."""
    return os.environ.get(IN_VM_ENV) == "1"


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


def find_kernel(boot: Path = Path("/boot")) -> Path:
    """The newest kernel image under /boot, the one VM mode boots."""
    images = sorted(boot.glob("vmlinuz-*"), key=_version_key)
    if not images:
        raise ToolMissing(
            f"no kernel image in {boot} for VM mode: apt-get install linux-image-amd64"
        )
    return images[-1]


def vng_path() -> str:
    """The vng executable: next to this Python (the venv) or on PATH."""
    local = Path(sys.executable).parent / "vng"
    found = str(local) if local.exists() else shutil.which("vng")
    if not found:
        raise ToolMissing("vng not found: pip install virtme-ng (make setup installs it)")
    return found


def kvm_usable(*, refresh: bool = False) -> bool:
    """Whether QEMU can use KVM here; probed once, the answer cached in CACHE_DIR/kvm.json."""
    key = f"{os.uname().release} {_qemu_version()}"
    cache = CACHE_DIR / "kvm.json"
    if not refresh:
        with contextlib.suppress(OSError, ValueError, KeyError):
            data = json.loads(cache.read_text())
            if data["key"] == key:
                return bool(data["usable"])
    usable = _probe_kvm()
    with contextlib.suppress(OSError):
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"key": key, "usable": usable}) + "\n")
    return usable


def _qemu_version() -> str:
    if shutil.which("qemu-system-x86_64") is None:
        return "none"
    out = _run_quiet(["qemu-system-x86_64", "--version"]).stdout
    return out.splitlines()[0] if out else "unknown"


def _probe_kvm() -> bool:
    """Start QEMU with KVM for a few seconds: some hosts' KVM aborts with 'failed to set MSR'."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK) or shutil.which("qemu-system-x86_64") is None:
        return False
    argv = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "64", "-nodefaults"]
    argv += ["-display", "none", "-no-reboot", "-serial", "none", "-monitor", "none"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return True  # still running after 3 s: the vCPU started fine
    return proc.returncode == 0 and "failed" not in err.lower()


def choose_mode(requested: str = "auto", *, hwsim: bool = False) -> tuple[str, str]:
    """Decide between "native" and "vm" rig mode; returns (mode, human-readable reason).
    `hwsim`: the rig needs mac80211_hwsim radios as well as netem."""
    release = os.uname().release
    if requested == "native":
        return "native", "--no-vm given"
    if in_vm():
        return "native", f"already inside the mprig VM (kernel {release})"
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


def _host_env() -> dict[str, str]:
    """Our environment with the venv's bin first on PATH (vng calls virtme-run from PATH)."""
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{venv_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def _guest_path() -> str:
    venv_bin = str(Path(sys.executable).parent)
    return f"{venv_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _vng_argv(
    share: Path, rwdirs: Sequence[Path], exec_cmd: str, memory: str, cpus: int
) -> list[str]:
    argv = [vng_path(), "--run", str(find_kernel()), "--name", VM_HOSTNAME]
    if not kvm_usable():
        argv.append("--disable-kvm")
    argv += ["--memory", memory, "--cpus", str(cpus), "--cwd", os.getcwd()]
    for d in [share, *rwdirs]:
        argv += ["--rwdir", str(Path(d).resolve())]
    return [*argv, "--exec", exec_cmd]


# virtme-ng gives the guest a generated /etc/shadow with every account locked ("!"); sshd
# without PAM refuses locked accounts even for key logins, which would lock the virtual
# rig's Ansible and runner out. Unlock root in the guest's throwaway copy only.
UNLOCK_ROOT = (
    "if grep -q '^root:!' /etc/shadow 2>/dev/null; then "
    "s=$(sed 's/^root:[^:]*:/root:*:/' /etc/shadow) && printf '%s\\n' \"$s\" > /etc/shadow; fi"
)


def _guest_script(argv: Sequence[str], status_file: Path) -> str:
    """Shell script the guest runs: environment, the command, then its exit status."""
    env = {IN_VM_ENV: "1", "PATH": _guest_path(), "HOME": "/tmp"}
    lines = ["#!/bin/sh", "mkdir -p /run/mprig /run/sshd /var/cache/mprig 2>/dev/null", UNLOCK_ROOT]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines += [f"cd {shlex.quote(os.getcwd())}", shlex.join(argv)]
    lines.append(f"echo $? > {shlex.quote(str(status_file))}")
    return "\n".join(lines) + "\n"


def _new_share() -> Path:
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
def boot_lock(lock: Path = BOOT_LOCK) -> Iterator[None]:
    """Serialize VM boots machine-wide (flock); a no-op when an ancestor already holds it."""
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
    memory: str = "2G",
    cpus: int = 2,
    timeout: float = 3600.0,
    console: Path | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> int:
    """Boot one VM, run argv inside, return argv's exit status.

    The guest's output is streamed to ours, or written to `console` if given. VM boots are
    serialized machine-wide with a lock on /tmp/mprig-vm.lock.
    """
    share = _new_share()
    try:
        status = share / "status"
        (share / "run.sh").write_text(_guest_script(argv, status))
        vng = _vng_argv(share, rwdirs, f"sh {share / 'run.sh'}", memory, cpus)
        with boot_lock():
            rc = _run_vng(vng, timeout, console, on_start)
        if not status.exists():
            raise MprigError(
                f"the VM exited (vng status {rc}) before {argv[0]} finished; "
                "rerun with --no-vm to see whether the command itself fails"
            )
        return int(status.read_text().strip() or "1")
    finally:
        shutil.rmtree(share, ignore_errors=True)


def _run_vng(
    vng: list[str],
    timeout: float,
    console: Path | None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None,
) -> int:
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(console, "ab")) if console else None
        proc = subprocess.Popen(
            vng,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            start_new_session=True,
            env=_host_env(),
        )
        stack.callback(_stop_watchdog, kill_group_with_parent(proc.pid))
        if on_start:
            on_start(proc)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise MprigError(f"VM run timed out after {timeout:.0f} s") from None
        except BaseException:
            _kill_group(proc)
            raise


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


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@dataclass(frozen=True)
class VmResult:
    """Outcome of one command run through a VmSession."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class VmSession:
    """One VM booted (through run_in_vm) for many commands: an agent inside runs command
    files the host drops into a shared directory, and writes back status and output.
    Polling, not inotify: inotify does not cross 9p/virtiofs.

        with VmSession() as vm:
            assert vm.run(["tc", "qdisc", "show"]).returncode == 0
        vm.exit_status  # the agent's exit status, as run_in_vm returned it
    """

    def __init__(
        self,
        *,
        memory: str = "2G",
        cpus: int = 2,
        rwdirs: Sequence[Path] = (),
        timeout: float = 3600.0,
        exit_with: int = 0,
    ) -> None:
        self.memory, self.cpus, self.rwdirs, self.timeout = memory, cpus, list(rwdirs), timeout
        self.exit_with = exit_with  # the agent exits with this status (tests propagation)
        self.share = Path()
        self.exit_status: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> VmSession:
        self.share = _new_share()
        for sub in ("queue", "done"):
            (self.share / sub).mkdir()
        self._thread = threading.Thread(target=self._boot, daemon=True)
        self._thread.start()
        self._wait_ready()
        return self

    def _boot(self) -> None:
        agent = [sys.executable, "-m", "mprig.vm", "agent", str(self.share)]
        try:
            self.exit_status = run_in_vm(
                agent,
                [self.share, *self.rwdirs],
                memory=self.memory,
                cpus=self.cpus,
                timeout=self.timeout,
                console=self.share / "console.log",
                on_start=self._started,
            )
        except BaseException as e:  # reported by the waiting side
            self._error = e

    def _started(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    def _alive(self) -> None:
        if self._thread is not None and not self._thread.is_alive():
            log = (self.share / "console.log").read_text(errors="replace")[-2000:]
            raise MprigError(f"the VM is gone ({self._error}); console tail: {log}")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + BOOT_TIMEOUT + LOCK_WAIT
        while not (self.share / "ready").exists():
            self._alive()
            if time.monotonic() > deadline:
                raise MprigError(f"the VM did not boot in {BOOT_TIMEOUT:.0f} s")
            time.sleep(0.2)

    def run(self, argv: Sequence[str], *, timeout: float = 120.0) -> VmResult:
        """Run argv inside the VM (cwd and environment as documented above)."""
        cid = uuid.uuid4().hex
        tmp = self.share / "queue" / f".{cid}.tmp"
        tmp.write_text(json.dumps({"argv": list(argv), "timeout": timeout}))
        tmp.rename(self.share / "queue" / f"{cid}.json")
        done = self.share / "done" / f"{cid}.json"
        deadline = time.monotonic() + timeout + 30
        while not done.exists():
            self._alive()
            if time.monotonic() > deadline:
                raise MprigError(f"no answer from the VM agent for {shlex.join(argv)}")
            time.sleep(0.1)
        data = json.loads(done.read_text())
        return VmResult(tuple(argv), data["returncode"], data["stdout"], data["stderr"])

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        (self.share / ".stop").write_text(str(self.exit_with))
        (self.share / ".stop").rename(self.share / "stop")
        if self._thread is not None:
            self._thread.join(timeout=90)
            if self._thread.is_alive() and self._proc is not None:
                _kill_group(self._proc)
                self._thread.join(timeout=10)
        shutil.rmtree(self.share, ignore_errors=True)


def agent(share: Path) -> int:
    """Guest side of VmSession: run queued command files until `stop` appears."""
    (share / "ready").touch()
    stop = share / "stop"
    while not stop.exists():
        for job in sorted((share / "queue").glob("*.json")):
            _agent_job(job, share / "done" / job.name)
        time.sleep(0.1)
    return int(stop.read_text().strip() or "0")


def _agent_job(job: Path, done: Path) -> None:
    spec = json.loads(job.read_text())
    job.unlink()
    try:
        p = subprocess.run(
            spec["argv"], capture_output=True, text=True, timeout=spec["timeout"], check=False
        )
        out = {"returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    except (OSError, subprocess.TimeoutExpired) as e:
        out = {"returncode": 127, "stdout": "", "stderr": f"mprig vm agent: {e}"}
    tmp = done.with_name(f".{done.name}.tmp")
    tmp.write_text(json.dumps(out))
    tmp.rename(done)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "agent":
        sys.exit(agent(Path(sys.argv[2])))
    print("usage: python -m mprig.vm agent SHARE_DIR", file=sys.stderr)
    sys.exit(2)
