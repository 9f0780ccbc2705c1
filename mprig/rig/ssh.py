"""The Host protocol over OpenSSH (virtual rig and lab alike).

Scripts (the runner's command batches) and fetches go over one long-lived session per host
(mprig.rig.session), so a run costs no SSH session set-up at all; other commands use one
`ssh -F <config>` each, and the config enables ControlMaster/ControlPersist, so after the
first command each call costs a fork of ssh, not a handshake. Every argv element is
quoted with shlex.quote for the remote shell. Host keys are always checked against the
rig's known_hosts (StrictHostKeyChecking=yes in the generated config, never disabled).

For the virtual rig, ssh runs inside the rig's controller namespace (`ip netns exec
mprig-<rig>-ctl ssh ...`), where the management bridge is; for a lab there is no prefix.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import IO

from mprig.errors import HostError
from mprig.rig.host import Result
from mprig.rig.session import Session, SessionError, remote_command

SSH_FAILED = 255  # ssh's own exit status when the connection (not the command) failed

# Remote wrapper for `start`: detach into a new session (pgid == pid, so `stop` signals the
# whole group), record the pid, run the command with output to the log, record its status.
# `setsid -f` rather than `&`: a shell's background jobs would ignore SIGINT.
_BG_WRAPPER = (
    'log=$1; shift; rm -f "$log.pid" "$log.rc"; '
    'setsid -f sh -c \'echo $$ > "$0.pid"; trap : INT TERM; '
    '"$@" > "$0" 2>&1 < /dev/null; echo $? > "$0.rc"\' "$log" "$@" '
    "> /dev/null 2>&1 < /dev/null; "
    'i=0; while [ ! -s "$log.pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; '
    'cat "$log.pid"'
)


@dataclass
class SshHost:
    """A rig host reached with `ssh -F ssh_config target`."""

    name: str  # inventory name
    target: str  # Host alias in ssh_config (or user@address for a lab)
    ssh_config: FsPath  # the rig's generated ssh_config
    netns: str | None = None  # run ssh inside this namespace (virtual rig controller)
    prefix: tuple[str, ...] = field(init=False)
    session: Session = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.prefix = ("ip", "netns", "exec", self.netns) if self.netns else ()
        self.session = Session(lambda token: self.ssh_argv(remote_command(token)))

    def ssh_argv(self, remote: str) -> list[str]:
        """The local argv that runs the shell command `remote` on this host."""
        return [*self.prefix, "ssh", "-F", str(self.ssh_config), self.target, "--", remote]

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        check: bool = True,
        input: bytes | None = None,
    ) -> Result:
        """Run argv remotely and wait; HostError on failure, transient if unreachable."""
        quoted = tuple(shlex.quote(a) for a in argv)
        p, seconds = self._exec(" ".join(quoted), timeout=timeout, input=input)
        result = Result(quoted, p.returncode, _text(p.stdout), _text(p.stderr), seconds)
        if p.returncode == SSH_FAILED:
            self._raise_connection(result)
        if check and p.returncode != 0:
            err = result.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
            raise HostError(self.name, f"`{' '.join(quoted)}` exited {p.returncode}: {err[0]}")
        return result

    def script(self, text: str, *, timeout: float = 30.0) -> Result:
        """Run a bash script over this host's long-lived session and wait for it."""
        start = time.monotonic()
        try:
            code, out, err = self.session.run(text, timeout=timeout)
        except SessionError as e:
            self._session_failed(e, "script")
        return Result(("bash", "-c", "<script>"), code, _text(out), err, time.monotonic() - start)

    def _session_failed(self, e: SessionError, what: str) -> typing.NoReturn:
        if e.returncode == SSH_FAILED:
            self._raise_connection(Result((), SSH_FAILED, "", e.stderr, 0.0))
        detail = e.stderr.strip().splitlines()[-1:] or [""]
        raise HostError(self.name, f"{what}: {e} {detail[0]}".rstrip(), transient=True)

    def _exec(
        self, remote: str, *, timeout: float, input: bytes | None = None
    ) -> tuple[subprocess.CompletedProcess[bytes], float]:
        start = time.monotonic()
        try:
            p = subprocess.run(
                self.ssh_argv(remote),
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HostError(
                self.name, f"timed out after {timeout:.0f} s: {remote}", transient=True
            ) from None
        return p, time.monotonic() - start

    def _raise_connection(self, result: Result) -> None:
        err = result.stderr.strip()
        if "Host key verification failed" in err or "REMOTE HOST IDENTIFICATION" in err:
            raise HostError(
                self.name,
                f"host key verification failed for {self.target} (known_hosts of "
                f"{self.ssh_config.parent}); the host is not the one the rig was built with",
            )
        if "Permission denied" in err:
            raise HostError(self.name, f"SSH key refused by {self.target}: {err}")
        raise HostError(
            self.name,
            f"unreachable over SSH ({err or 'ssh exited 255'}); "
            "check the rig with `mprig rig status`",
            transient=True,
        )

    def start(self, argv: Sequence[str], *, log: str) -> SshBackground:
        """Start argv detached; stdout+stderr go to remote `log`, pid to `log`.pid."""
        r = self.run(["sh", "-c", _BG_WRAPPER, "mprig-bg", log, *argv], timeout=15)
        pid = r.stdout.strip()
        if not pid.isdigit():
            raise HostError(self.name, f"could not start {shlex.join(argv)}: no pid in {log}.pid")
        return SshBackground(self, tuple(argv), log, int(pid))

    def fetch(self, remote: str, local: FsPath) -> None:
        """Copy a remote file to `local` (`cat` over the host's session, streamed)."""
        self._stream(f"exec cat -- {shlex.quote(remote)}", local, remote)

    def read_tar(
        self, directory: str, names: Sequence[str], consume: Callable[[IO[bytes]], None]
    ) -> None:
        """A tar of `names` in the remote `directory`, handed to `consume` as a stream while
        tar writes it: nothing of it is stored on either side. An error `consume` raises is
        raised here once the stream has ended (the rest of it is read and dropped, so the
        remote tar is never left blocked); a failed tar is raised first, as HostError."""
        argv = ["tar", "-C", directory, "-cf", "-", "--", *names]
        what = f"{directory}: {' '.join(names)}"
        fd_in, fd_out = os.pipe()
        failed: list[BaseException] = []

        def reader() -> None:
            with open(fd_in, "rb") as stream:
                try:
                    consume(stream)
                except BaseException as e:  # re-raised in the caller's thread below
                    failed.append(e)
                while stream.read(1 << 16):
                    pass

        thread = threading.Thread(target=reader, name=f"read-tar-{self.name}", daemon=True)
        thread.start()
        try:
            with open(fd_out, "wb") as pipe:
                self._send(f"exec {shlex.join(argv)}", pipe.write, what)
        finally:
            thread.join()
        if failed:
            raise failed[0]

    def _stream(self, script: str, local: FsPath, what: str) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        with open(local, "wb") as out:
            self._send(script, out.write, what)

    def _send(self, script: str, sink: Callable[[bytes], object], what: str) -> None:
        try:
            code, _, err = self.session.run(script, timeout=300, sink=sink)
        except SessionError as e:
            self._session_failed(e, f"fetch {what}")
        if code != 0:
            raise HostError(self.name, f"fetch {what} failed: {err.strip()}")

    def close(self) -> None:
        """End this host's session and stop its ControlMaster connection, if any."""
        self.session.close()
        argv = [*self.prefix, "ssh", "-F", str(self.ssh_config), "-O", "exit", self.target]
        subprocess.run(argv, capture_output=True, timeout=10, check=False)


@dataclass
class SshBackground:
    """A command started by SshHost.start."""

    host: SshHost
    argv: tuple[str, ...]
    log: str  # remote log file; pid in log.pid, exit status in log.rc
    pid: int  # remote pid, also its process group and session id
    started: float = field(default_factory=time.monotonic)

    def stop(self, *, signal: str = "INT", timeout: float = 5.0) -> Result:
        """Signal the command's process group, wait for it, KILL after timeout."""
        self.host.run(["kill", f"-{signal}", "--", f"-{self.pid}"], check=False)
        try:
            return self.wait(timeout)
        except HostError as e:
            if e.transient is False:
                raise
        self.host.run(["kill", "-KILL", "--", f"-{self.pid}"], check=False)
        return self.wait(5.0)

    def wait(self, timeout: float) -> Result:
        """Wait for the exit status file; HostError(transient) on timeout."""
        rc_file = f"{self.log}.rc"
        script = (
            'i=0; while [ ! -s "$1" ] && [ $i -lt "$2" ]; do sleep 0.05; i=$((i+1)); done; '
            'cat "$1" 2>/dev/null'
        )
        ticks = str(max(1, int(timeout / 0.05)))
        r = self.host.run(["sh", "-c", script, "mprig-wait", rc_file, ticks], timeout=timeout + 15)
        status = r.stdout.strip()
        if not status.lstrip("-").isdigit():
            raise HostError(
                self.host.name,
                f"{shlex.join(self.argv)} still running after {timeout:.0f} s",
                transient=True,
            )
        out = self.host.run(["cat", "--", self.log], check=False, timeout=60).stdout
        quoted = tuple(shlex.quote(a) for a in self.argv)
        return Result(quoted, int(status), out, "", time.monotonic() - self.started)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")
