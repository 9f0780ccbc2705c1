"""A long-lived shell on a host: many scripts, one SSH session.

Every new SSH session costs a process on each end, a channel, and a start of the user's
shell with its start-up files. On a lab host that is a tenth of a second; inside the
emulated VM of VM mode it is 4-5 s, and a run needs a dozen round trips. So the runner
keeps one session per host open for a campaign: the remote end is a small bash loop that
reads length-prefixed scripts from stdin and runs each in a subshell, and the local end
writes a script and reads its output up to an end marker carrying the script's status.

Framing (local -> remote): `<n>\\n<n bytes of script>`. Remote -> local: the script's
stdout, byte for byte, then `\\n@@mprig-session-<token> <status>\\n<stderr>\\n@@mprig-
session-<token>-done\\n`. The token is random per session, so no command output can end a
frame early. Output goes to a sink as it arrives (a fetched capture never sits in memory).

A session that times out, or whose SSH connection drops, is killed and replaced by a new
one on the next script; the caller sees a transient HostError, as with one-shot SSH.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import selectors
import shlex
import subprocess
import threading
import time
import typing
from collections.abc import Callable, Sequence

MARK = "@@mprig-session-"

# The remote loop. `read -N` counts characters, hence LC_ALL=C (bytes). Each script runs in
# a subshell: its `exit`, traps and variables end with it. Its stderr is collected in a
# file and sent after the status, so stdout stays unmixed. Under VM emulation every program
# started costs 0.1-0.3 s, so where Debian's bash-builtins package is installed, `mkdir` and
# `rm` (run directories, the scripts' stderr files) are bash's own loadable builtins, the
# same for every script of the session; without it they stay the programs.
LOOP = r"""export LC_ALL=C
BASH_LOADABLES_PATH=/usr/lib/bash:/usr/local/lib/bash
for b in mkdir rm; do enable -f "$b" "$b" 2>/dev/null; done
E="${TMPDIR:-/tmp}/mprig-session.$$.err"
trap 'rm -f "$E"' EXIT
while IFS= read -r n; do
  s=
  [ "$n" -gt 0 ] && { IFS= read -r -d '' -N "$n" s || exit 0; }
  ( eval "$s" ) < /dev/null 2> "$E"
  rc=$?
  err=; IFS= read -r -d '' err < "$E"
  printf '\n%s %s\n%s\n%s-done\n' "$M" "$rc" "$err" "$M"
done
"""


def loop_command(token: str) -> list[str]:
    """argv of the remote end (bash without start-up files) for a session with `token`."""
    return ["bash", "--noprofile", "--norc", "-c", f"M={MARK}{token}\n{LOOP}"]


class SessionError(Exception):
    """The session could not run a script: timed out, or the connection ended."""

    def __init__(self, message: str, *, returncode: int | None, stderr: str) -> None:
        super().__init__(message)
        self.returncode = returncode  # of the local process, if it exited
        self.stderr = stderr  # what the local process wrote (ssh's own errors)


class Session:
    """One long-lived shell; `spawn(token)` returns the local argv that starts it."""

    def __init__(self, spawn: Callable[[str], Sequence[str]]) -> None:
        self.spawn = spawn
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.token = ""
        self.stderr = bytearray()  # the local process's stderr, drained by a thread
        self.drain: threading.Thread | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        self.token = secrets.token_hex(8)
        self.stderr = bytearray()
        proc = subprocess.Popen(
            list(self.spawn(self.token)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C reaches the runner, which tears down over it
        )
        assert proc.stderr is not None
        self.drain = threading.Thread(target=_drain, args=(proc.stderr, self.stderr), daemon=True)
        self.drain.start()
        self.proc = proc
        return proc

    def run(
        self, script: str, *, timeout: float, sink: Callable[[bytes], object] | None = None
    ) -> tuple[int, bytes, str]:
        """Run `script`; returns (status, stdout, stderr). With `sink`, stdout goes there as
        it arrives and the returned stdout is empty. SessionError on timeout or EOF."""
        with self.lock:
            proc = self.proc if self.proc and self.proc.poll() is None else self._start()
            assert proc.stdin is not None and proc.stdout is not None
            data = script.encode()
            try:
                proc.stdin.write(b"%d\n%s" % (len(data), data))
                proc.stdin.flush()
            except OSError:
                self._fail("the session ended before the script was sent")
            out = bytearray()
            reader = _FrameReader(
                f"{MARK}{self.token}".encode(), out.extend if sink is None else sink
            )
            deadline = time.monotonic() + timeout
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                while not reader.done:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._fail(f"timed out after {timeout:.0f} s")
                    if not sel.select(left):
                        continue
                    chunk = os.read(proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        self._fail("the session ended")
                    reader.feed(chunk)
            return reader.status, bytes(out), reader.err

    def _fail(self, why: str) -> typing.NoReturn:
        code = self._reap(kill=True)
        raise SessionError(why, returncode=code, stderr=bytes(self.stderr).decode(errors="replace"))

    def _reap(self, *, kill: bool) -> int | None:
        """End the local process (EOF on its stdin ends the remote loop); its status."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            code = proc.wait(timeout=0 if kill else 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if self.drain is not None:
            self.drain.join(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        return code

    def close(self) -> None:
        """End the session."""
        with self.lock:
            self._reap(kill=False)


class _FrameReader:
    """Passes a script's stdout to `sink` and finds the frame's end."""

    def __init__(self, mark: bytes, sink: Callable[[bytes], object]) -> None:
        self.start = b"\n" + mark + b" "
        self.end = re.compile(
            rb"\n" + re.escape(mark) + rb" (-?\d+)\n(.*)\n" + re.escape(mark) + rb"-done\n\Z", re.S
        )
        self.sink = sink
        self.held = b""  # what may be the start of the trailer
        self.trailer: bytes | None = None
        self.done = False
        self.status = -1
        self.err = ""

    def feed(self, chunk: bytes) -> None:
        if self.trailer is not None:
            self.trailer += chunk
        else:
            buf = self.held + chunk
            at = buf.find(self.start)
            if at < 0:
                keep = _partial_suffix(buf, self.start)
                self.sink(buf[: len(buf) - keep])
                self.held = buf[len(buf) - keep :]
                return
            self.sink(buf[:at])
            self.held = b""
            self.trailer = buf[at:]
        m = self.end.match(self.trailer)
        if m:
            self.status = int(m.group(1))
            self.err = m.group(2).decode(errors="replace")
            self.done = True


def _partial_suffix(buf: bytes, pattern: bytes) -> int:
    """Length of the longest suffix of buf that is a proper prefix of pattern."""
    for n in range(min(len(pattern) - 1, len(buf)), 0, -1):
        if buf.endswith(pattern[:n]):
            return n
    return 0


def _drain(stream: object, into: bytearray) -> None:
    read = stream.read1  # type: ignore[attr-defined]
    while chunk := read(4096):
        into.extend(chunk[-4096:])
        del into[:-8192]


def remote_command(token: str) -> str:
    """The shell command line an SSH client sends to start the remote loop."""
    return "exec " + shlex.join(loop_command(token))
