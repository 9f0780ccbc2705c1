"""Files mprig writes: atomically, and one writer per results directory.

Every result file (run.json, metrics, parquet tables, reports, figures) goes through
`atomic_path`: the content is written to a temporary file in the same directory, fsynced,
and renamed over the target, so a reader sees the old file or the new one, never half of
one; a full disk or a permission error names the path and leaves the previous file in
place. `exclusive` is the flock that makes one writer per results directory (the campaign
lock of `mprig run`, also taken by `collect`, `report` and `compare`) or per rig.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from mprig.errors import MprigError, RigBusy

LOCK_NAME = "campaign.lock"  # the lock file of a results directory


class WriteError(MprigError):
    """A result file could not be written (disk full, permission, read-only ...)."""


def io_message(path: Path, e: OSError, doing: str = "cannot write") -> str:
    """`PATH: cannot write: No space left on device` (one line, the path named)."""
    reason = e.strerror or str(e)
    hint = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space"}.get(e.errno or 0)
    hint = hint or ("check its permissions" if e.errno in (errno.EACCES, errno.EPERM) else None)
    return f"{path}: {doing}: {reason}" + (f"; {hint}" if hint else "")


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to PATH; when the block ends, fsync it and rename it
    over PATH. On any error the temporary file is removed, PATH is left as it was, and an
    OSError becomes a WriteError naming PATH."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        try:
            yield tmp
            fsync_path(tmp)
            os.replace(tmp, path)
            fsync_path(path.parent)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    except OSError as e:
        raise WriteError(io_message(path, e)) from None


def write_bytes(path: Path, data: bytes) -> Path:
    """Write DATA to PATH atomically."""
    with atomic_path(path) as tmp, tmp.open("wb") as f:
        f.write(data)
    return path


def write_text(path: Path, text: str) -> Path:
    """Write TEXT (UTF-8) to PATH atomically."""
    return write_bytes(path, text.encode())


def write_json(path: Path, doc: Any) -> Path:
    """Write DOC as indented JSON to PATH atomically."""
    return write_text(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


def write_with(path: Path, writer: Callable[[Path], object]) -> Path:
    """Let WRITER write the file (to_parquet, savefig, to_csv) to a temporary path, then
    rename it to PATH: the writer must not guess the format from the name."""
    with atomic_path(path) as tmp:
        writer(tmp)
    return path


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (a rename is durable once its directory is synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- locks ------------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def results_lock(directory: Path, command: str) -> Iterator[None]:
    """The writer's lock of a results directory, for COMMAND (`collect`, `report` ...): a
    second writer (another collect, a running campaign) gets RigBusy naming the holder."""
    with exclusive(directory / LOCK_NAME, f"results directory {directory} ({command})"):
        yield


@contextlib.contextmanager
def exclusive(path: Path, what: str, say: Any = None) -> Iterator[None]:
    """Hold an flock on `path` (pid, host, start time inside) for a campaign or a rig; the
    file is removed on release.

    A lock file left by a dead process is taken over (flock itself died with the process;
    `say` is told about it); a live holder raises RigBusy naming it.
    """
    f, previous = _acquire(path, what)
    try:
        pid = previous.get("pid")
        if isinstance(pid, int) and pid != os.getpid() and say is not None:
            state = "no longer running" if not _pid_alive(pid) else "lock released"
            say(f"taking over the stale lock {path} of pid {pid} ({state})")
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "what": what,
        }
        f.seek(0)
        f.truncate()
        f.write(json.dumps(info) + "\n")
        f.flush()
        yield
    finally:
        path.unlink(missing_ok=True)  # still holding the lock: nobody has it open locked
        f.close()


def _acquire(path: Path, what: str) -> tuple[IO[str], dict[str, Any]]:
    """Open and flock `path`; retry when its holder removed it meanwhile."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError(io_message(path.parent, e, "cannot create")) from None
    while True:
        try:
            f = open(path, "a+")  # noqa: SIM115 - closed by exclusive()
        except OSError as e:
            raise WriteError(io_message(path, e, "cannot open the lock")) from None
        f.seek(0)
        previous = _lock_info(f.read())
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            who = f"pid {previous.get('pid', '?')} on {previous.get('host', '?')}"
            doing = f" ({previous['what']})" if isinstance(previous.get("what"), str) else ""
            raise RigBusy(
                f"{what} is in use by {who}{doing} since {previous.get('started', '?')} "
                f"(lock {path}); wait for it or stop it"
            ) from None
        try:
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                return f, previous
        except FileNotFoundError:
            pass
        f.close()


def _lock_info(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
