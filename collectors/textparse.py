"""Shared pieces of the tool-output parsers (ss, nstat, iperf3): their one error type."""

from __future__ import annotations

from mprig.errors import UsageError


class ParseError(UsageError):
    """A tool's output does not read as expected: names the line and what was found.

    Parsers take text, not files, so they know the line but not the file name; the caller
    that read the file re-raises with `in_file` to name it.
    """

    def __init__(self, line: int | None, message: str, file: str | None = None) -> None:
        self.line, self.message, self.file = line, message, file
        where = ":".join(str(p) for p in (file, line) if p is not None)
        super().__init__(f"{where}: {message}" if where else message)

    def in_file(self, file: str) -> ParseError:
        """The same error, naming the file it came from."""
        return ParseError(self.line, self.message, file)
