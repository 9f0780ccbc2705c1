"""Opening files a user names, safely: only regular files, never a FIFO, a device or a
directory (opening a FIFO for reading blocks until a writer appears: `mprig validate fifo`
would hang), and text shown back to the user with its control characters escaped.

Every command that opens a path given on the command line, or found in a results
directory (run.json, captures), goes through `open_regular` or `read_regular`.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO

from mprig.errors import UsageError, escape

__all__ = ["NotRegularFile", "check_regular", "escape", "open_regular", "read_regular"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegularFile(UsageError):
    """A path that should name a regular file names something else."""


def kind_of(mode: int) -> str:
    """What a stat mode names, in words ("a FIFO (named pipe)", "a regular file")."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def open_regular(path: str | os.PathLike[str], what: str = "file") -> BinaryIO:
    """Open `path` for binary reading if it is a regular file; else NotRegularFile.

    The file is opened non-blocking and checked with fstat on the open descriptor, so a
    FIFO is refused without waiting for a writer and a file swapped in between a check and
    the open cannot slip through. OSError (missing, permission) propagates unchanged.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            shown = escape(os.fspath(path))
            raise NotRegularFile(f"{shown}: {what} is {kind_of(mode)}, not a regular file")
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int, what: str = "file") -> bytes:
    """Up to `limit` + 1 bytes of a regular file (callers refuse more than `limit`)."""
    with open_regular(path, what) as f:
        return f.read(limit + 1)


def check_regular(path: str | os.PathLike[str], what: str = "file") -> Path:
    """`path` if it names a regular file (symlinks followed); NotRegularFile otherwise.

    For tools that open the file themselves (tcpdump -r, ansible-inventory): checked with
    stat, which never blocks on a FIFO. OSError (missing, permission) propagates.
    """
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(f"{escape(os.fspath(path))}: {what} is {kind_of(mode)}")
    return Path(path)
