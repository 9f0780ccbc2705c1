"""Progress of a campaign: a rich progress bar for people, JSON event lines for CI, and
`events.jsonl` in the results directory either way."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, Any

from mprig import startup

EVENTS_FILE = "events.jsonl"


def fmt_duration(seconds: float) -> str:
    """`1:02:03` / `2:03`: how long, for people."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Reporter:
    """Receives runner events; records them and shows them.

    Args:
        results: the campaign's results directory (events.jsonl goes there).
        quiet: no progress display (errors still reach stderr through the CLI).
        log_json: one JSON object per event on stderr instead of the progress display.
    """

    def __init__(self, results: Path, *, quiet: bool = False, log_json: bool = False) -> None:
        self.events: IO[str] = (results / EVENTS_FILE).open("a", buffering=1)
        self.quiet, self.log_json = quiet, log_json
        self.total = self.done = self.failures = self.skipped = 0
        self.started = time.monotonic()
        self.run_seconds: list[float] = []
        self._bar: Any = None
        self._task: Any = None

    def emit(self, event: str, **fields: Any) -> None:
        """Record one event (and show it as a JSON line with --log-json)."""
        line = json.dumps({"time": round(time.time(), 3), "event": event, **fields})
        self.events.write(line + "\n")
        if self.log_json:
            print(line, file=sys.stderr, flush=True)

    def eta(self) -> float | None:
        """Seconds left: mean duration of the runs executed so far x runs left."""
        left = self.total - self.done - self.skipped
        if not self.run_seconds:
            return None
        return sum(self.run_seconds) / len(self.run_seconds) * left

    def status_line(self, current: str = "", *, finished: bool = False) -> str:
        """`run n/N  elapsed  ETA  failures`: the progress text (n: the run in progress,
        or with `finished` the last one done)."""
        n = min(self.done + self.skipped + (0 if finished else 1), self.total)
        eta = self.eta()
        parts = [
            f"run {n}/{self.total}",
            f"elapsed {fmt_duration(time.monotonic() - self.started)}",
            f"ETA {fmt_duration(eta) if eta is not None else '?'}",
            f"failures {self.failures}",
        ]
        return "  ".join(parts + ([current] if current else []))

    # -- campaign events ------------------------------------------------------------------

    def campaign_start(self, campaign: str, total: int, skipped: int, **fields: Any) -> None:
        self.total, self.skipped = total, skipped
        self.emit("campaign_start", campaign=campaign, runs=total, skip=skipped, **fields)
        if self.quiet or self.log_json:
            return
        if sys.stderr.isatty():
            self._start_bar()
        else:
            print(f"mprig: {campaign}: {total} runs, {skipped} already complete", file=sys.stderr)
        if fields.get("startup_s"):
            self._say(f"{campaign}: {startup.line(fields['startup_s'])}")

    def _start_bar(self) -> None:
        from rich.progress import BarColumn, Progress, TextColumn

        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(), transient=False, refresh_per_second=2
        )
        self._bar.start()
        self._task = self._bar.add_task(self.status_line(), total=self.total)
        self._bar.update(self._task, completed=self.skipped)

    def run_start(self, run_id: str, index: int, reason: str) -> None:
        self.emit("run_start", run_id=run_id, index=index, reason=reason)
        self._show(self.status_line(run_id))

    def retry(self, run_id: str, attempt: int, reason: str) -> None:
        self.emit("retry", run_id=run_id, attempt=attempt, reason=reason)
        self._say(f"retrying {run_id} (attempt {attempt}): {reason}")

    def run_end(self, run_id: str, status: str, seconds: float, reason: str = "") -> None:
        self.done += 1
        self.run_seconds.append(seconds)
        if status != "complete":
            self.failures += 1
        self.emit("run_end", run_id=run_id, status=status, seconds=round(seconds, 3), reason=reason)
        if status != "complete":
            self._say(f"{run_id}: {status}: {reason}")
        elif self._bar is None and not (self.quiet or self.log_json):
            line = self.status_line(finished=True)
            print(f"{line}  {run_id} complete ({seconds:.1f} s)", file=sys.stderr)
        self._show(self.status_line(), advance=True)

    def message(self, text: str, **fields: Any) -> None:
        """A note for people (stale lock taken over, leftovers removed ...)."""
        self.emit("message", text=text, **fields)
        self._say(text)

    def campaign_end(self, **fields: Any) -> None:
        self.emit("campaign_end", **fields)
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if not self.events.closed:
            self.events.close()

    # -- display --------------------------------------------------------------------------

    def _show(self, text: str, advance: bool = False) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=text, advance=1 if advance else 0)

    def _say(self, text: str) -> None:
        if self.log_json or self.quiet:
            return
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            print(f"mprig: {text}", file=sys.stderr)
