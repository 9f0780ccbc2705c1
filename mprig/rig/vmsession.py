"""One VM for many commands: VmSession (host side) and its agent (guest side).

Built on mprig.rig.vm.run_in_vm: the agent is the command the VM runs, and it executes the
command files the host drops into the shared directory until told to stop.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from mprig.errors import MprigError
from mprig.rig import vmboot
from mprig.rig.vm import BOOT_TIMEOUT, KVM_BOOT_TIMEOUT, new_share, run_in_vm

LOCK_WAIT = 1800.0  # seconds a VmSession may wait for another VM to finish


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
        timeout: float | None = None,
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
        self.share = new_share()
        for sub in ("queue", "done"):
            (self.share / sub).mkdir()
        self._thread = threading.Thread(target=self._boot, daemon=True)
        self._thread.start()
        self._wait_ready()
        return self

    def _boot(self) -> None:
        agent = [sys.executable, "-m", "mprig.rig.vmsession", "agent", str(self.share)]
        try:
            self.exit_status = run_in_vm(
                agent,
                [self.share, *self.rwdirs],
                memory=self.memory,
                cpus=self.cpus,
                timeout=self.timeout,
                console=self.share / "console.log",
                on_start=self._started,
                say=self._note,
            )
        except BaseException as e:  # reported by the waiting side
            self._error = e

    def _started(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    def _note(self, text: str) -> None:
        with open(self.share / "console.log", "a") as log:
            log.write(f"mprig: {text}\n")

    def _alive(self) -> None:
        if self._thread is not None and not self._thread.is_alive():
            log = (self.share / "console.log").read_text(errors="replace")[-2000:]
            raise MprigError(f"the VM is gone ({self._error}); console tail: {log}")

    def _wait_ready(self) -> None:
        boots = KVM_BOOT_TIMEOUT + BOOT_TIMEOUT  # vmboot stops a boot that overruns
        deadline = time.monotonic() + boots + LOCK_WAIT + 60
        while not (self.share / "ready").exists():
            self._alive()
            if time.monotonic() > deadline:
                raise MprigError(f"the VM did not boot in {boots:.0f} s")
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
                vmboot.kill_group(self._proc)
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
    print("usage: python -m mprig.rig.vmsession agent SHARE_DIR", file=sys.stderr)
    sys.exit(2)
