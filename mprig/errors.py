"""mprig's own errors. Low-level errors are converted at the boundary into one of these,
naming the file and line, host, or artifact, and what to do about it."""

from __future__ import annotations


class MprigError(Exception):
    """Base of every error the CLI reports as one line (no traceback)."""

    exit_code = 1


class UsageError(MprigError):
    """Bad command-line use or bad input file: exit status 2."""

    exit_code = 2


class SpecError(UsageError):
    """A campaign file is invalid: `file:line: field: message`."""

    def __init__(self, file: str, line: int | None, field: str, message: str) -> None:
        self.file, self.line, self.field, self.message = file, line, field, message
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class HostError(MprigError):
    """A command on a rig host failed or the host is unreachable."""

    def __init__(self, host: str, message: str, *, transient: bool = False) -> None:
        self.host, self.transient = host, transient
        super().__init__(f"{host}: {message}")


class ToolMissing(MprigError):
    """A required binary or kernel feature is absent: the message says what to install."""


class RigBusy(MprigError):
    """Another campaign holds the rig's lock."""
