"""One VM boot, watched: readiness, heartbeats, deadlines, and output a person can follow.

vng hands QEMU our file descriptors 1 and 2 by path (/proc/self/fd/N), and QEMU opens them
with O_TRUNC: a log redirected with `> run.log` lost everything printed before the VM. So
vng gets pipes of its own; two threads copy the guest's stdout and stderr to ours once
the guest is up, and everything before that (QEMU's and vng's own messages) to a console
log whose tail explains a failed boot.

The guest script (vm._guest_script) prints READY_MARKER as its first line, on stdout and
then on stderr, and refreshes a heartbeat file every HEARTBEAT_S seconds. Each pipe is
routed by the marker seen on that pipe (stdout's also stands for stderr's where vng merges
the guest's stderr into its stdout): the two threads run at their own pace, and a guest
line on stderr read before the stdout thread reached its marker went to the console log,
which is deleted after the run. The host gives the boot `boot_deadline` seconds
to show the marker and the running guest `stale_after` seconds between heartbeats.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TextIO

from mprig.errors import MprigError

READY_MARKER = b"@@mprig-guest-up"
HEARTBEAT_FILE = "heartbeat"
HEARTBEAT_S = 5


def env_seconds(name: str, default: float) -> float:
    """A deadline in seconds from the environment (for slow hosts and tests)."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


class BootFailed(MprigError):
    """The guest did not reach userspace: the caller may boot again without KVM."""


class Console:
    """Copies vng's two pipes: to `log` before the guest is up, to our streams after.

    `log` gets everything when `to_log_only` (VmSession: the console is a file of its
    own). The last lines before readiness are kept for error messages. The guest prints
    the marker before anything else, so routing by the flag keeps the guest's lines.
    """

    def __init__(self, log: IO[bytes], *, to_log_only: bool) -> None:
        self.log, self.to_log_only = log, to_log_only
        self.ready = threading.Event()  # the marker seen on stdout: the guest is up
        self._err_ready = threading.Event()  # the marker seen on stderr
        self.tail: collections.deque[str] = collections.deque(maxlen=12)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        for pipe, sink, is_out in ((stdout, sys.stdout, True), (stderr, sys.stderr, False)):
            t = threading.Thread(target=self._copy, args=(pipe, sink, is_out), daemon=True)
            t.start()
            self._threads.append(t)

    def join(self, timeout: float = 10.0) -> None:
        for t in self._threads:
            t.join(timeout)
        with self._lock:
            self.log.flush()

    def _copy(self, pipe: IO[bytes], sink: TextIO, is_out: bool) -> None:
        for line in iter(pipe.readline, b""):
            if line.rstrip() == READY_MARKER:
                (self.ready if is_out else self._err_ready).set()
                continue
            with self._lock:
                self._route(line, sink, is_out)

    def _route(self, line: bytes, sink: TextIO, is_out: bool) -> None:
        up = self.ready.is_set() or (not is_out and self._err_ready.is_set())
        if self.to_log_only or not up:
            self.log.write(line)
            self.log.flush()
            if not up:
                self.tail.append(line.decode(errors="replace").rstrip())
            return
        _write(sink, line)


def _write(sink: TextIO, line: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ValueError):
        sink.buffer.write(line)
        sink.flush()


class Watch:
    """Deadlines of one boot: readiness, liveness (heartbeats) and the whole run."""

    def __init__(
        self,
        share: Path,
        *,
        boot_deadline: float,
        stale_after: float,
        timeout: float | None,
        say: Callable[[str], None],
        how: str,
    ) -> None:
        self.share, self.boot_deadline, self.stale_after = share, boot_deadline, stale_after
        self.timeout, self.say, self.how = timeout, say, how
        self.started = time.monotonic()
        self.up_at: float | None = None
        self._beat = ""
        self._beat_at = self.started
        self._told = 0

    def check(self, ready: bool) -> None:
        """Raise BootFailed or MprigError when a deadline has passed."""
        now = time.monotonic()
        if not ready:
            self._booting(now)
            return
        if self.up_at is None:
            self.up_at = self._beat_at = now
            self.say(f"VM up after {now - self.started:.0f} s ({self.how})")
        self._alive(now)
        if self.timeout is not None and now - self.started > self.timeout:
            raise MprigError(
                f"the VM ran past its deadline of {self.timeout:.0f} s (derived from the "
                "plan's runs and durations); it was stopped. Runs completed so far are kept"
            )

    def _booting(self, now: float) -> None:
        waited = now - self.started
        if waited > self.boot_deadline:
            raise BootFailed(
                f"the guest did not reach userspace within {self.boot_deadline:.0f} s ({self.how})"
            )
        if waited >= self._told + 30:
            self._told += 30
            self.say(f"still booting the VM: {waited:.0f} s of at most {self.boot_deadline:.0f} s")

    def _alive(self, now: float) -> None:
        with contextlib.suppress(OSError):
            beat = (self.share / HEARTBEAT_FILE).read_text()
            if beat != self._beat:
                self._beat, self._beat_at = beat, now
        if now - self._beat_at > self.stale_after:
            raise MprigError(
                f"the VM stopped answering: no heartbeat for {now - self._beat_at:.0f} s "
                f"(limit {self.stale_after:.0f} s); it was stopped"
            )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the VM's process group (vng, QEMU, virtiofsd) and reap vng."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _close(proc: subprocess.Popen[bytes], console: Console, *, wait: float) -> None:
    console.join(timeout=wait)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def supervise(proc: subprocess.Popen[bytes], console: Console, watch: Watch) -> int:
    """Wait for vng while checking the watch; vng's exit status, or BootFailed/MprigError
    (the VM killed first)."""
    try:
        while True:
            try:
                rc = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                watch.check(console.ready.is_set())
    except BaseException:
        kill_group(proc)
        _close(proc, console, wait=5)
        raise
    _close(proc, console, wait=10)
    if not console.ready.is_set():
        tail = " | ".join(line for line in console.tail if line.strip())[-600:]
        raise BootFailed(
            f"vng exited with status {rc} before the guest reached userspace ({watch.how})"
            + (f": {tail}" if tail else "")
        )
    return rc
