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
    """A campaign file is invalid: `file:line: field: message`, one line per error.

    `errors` lists every error found (this one first); str() is one line per error, with
    control characters from the file (names, keys, values) escaped, so no input can start
    a line of its own.
    """

    def __init__(self, file: str, line: int | None, field: str, message: str) -> None:
        self.file, self.line, self.field, self.message = file, line, field, message
        where = escape(f"{file}:{line}" if line is not None else file)
        text = f"{where}: {escape(field)}: " if field else f"{where}: "
        super().__init__(text + escape(message))
        self.errors: tuple[SpecError, ...] = (self,)

    @classmethod
    def many(cls, errors: list[SpecError]) -> SpecError:
        """One SpecError carrying several, in order (the first gives file, line, field)."""
        first = errors[0]
        combined = cls(first.file, first.line, first.field, first.message)
        combined.errors = tuple(errors)
        combined.args = ("\n".join(str(e) for e in errors),)
        return combined


class HostError(MprigError):
    """A command on a rig host failed or the host is unreachable."""

    def __init__(self, host: str, message: str, *, transient: bool = False) -> None:
        self.host, self.transient = host, transient
        super().__init__(f"{host}: {message}")


class ToolMissing(MprigError):
    """A required binary or kernel feature is absent: the message says what to install."""


class RigBusy(MprigError):
    """Another campaign holds the rig's lock."""


class NotCollected(MprigError):
    """`mprig collect` could not collect (the directory in use, a file it could not write):
    exit status 4, which a recipe tells from artifact problems (1: every table written, the
    unreadable metrics null) and stops on instead of archiving."""

    exit_code = 4


def error_lines(e: MprigError) -> list[str]:
    """The lines an error prints: one per spec error; any other error on one line, with
    control characters escaped (file names and values in it may come from the user)."""
    if isinstance(e, SpecError):
        return [str(one) for one in e.errors]
    return [escape(str(e))]


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}


def escape(text: str) -> str:
    """`text` with control characters (C0, DEL, C1, line and paragraph separators) written
    as escapes (`\\n`, `\\e`, `\\x07`, `\\u2028`), so input echoed in a message cannot
    start a new line, move the cursor or change colours."""
    if text.isprintable():
        return text
    return "".join(_escape_char(c) for c in text)


def _escape_char(c: str) -> str:
    if c.isprintable() or c == " ":
        return c
    if c in _ESCAPES:
        return _ESCAPES[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
