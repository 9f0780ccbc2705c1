"""The timed agent: applies a run's scheduled changes on one host during the traffic.

Sent as `python3 -c` (a lab host needs Python, not mprig), started in the run's set-up: it
starts one long-lived `<tool> -force -batch -` per tool its schedule needs (tc, ip), says
`ready` once Python and they are up (seconds under VM emulation) and waits for SIGUSR1,
which the runner sends in the traffic stage just before the traffic client starts: that
signal is the timeline's t = 0 on every host. argv[1] is the schedule as JSON: [[t_s,
tool, line, label], ...] sorted by t_s, tool "tc" or "ip".

A change costs a write to the open batch, not a process start (a fraction of a second under
VM emulation). After the lines due at one moment the agent writes a marker, a `show` of a
device that does not exist: the tool reports that failure on stderr (`Command failed
-:<line>`, unbuffered, as it reports any failed line), so seeing the marker's line number
means every line before it is done, and a failed change is known by its own line number,
with the message printed before it.
One JSON line per change goes to stdout (the bundle's timeline-<host>.jsonl): scheduled
time, when it was issued and done (monotonic seconds since the signal), the realtime of
the signal, its exit status (1: the tool reported the line failed). Standard library only.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from typing import Any

MARKS = {"tc": "qdisc show dev mprig-none", "ip": "link show dev mprig-none"}
FAILED = re.compile(r"^Command failed -:(\d+)$")


class Batch:
    """One `<tool> -force -batch -` fed line by line."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.proc: subprocess.Popen[str] | None = None
        self.count = 0  # lines written to the current process

    def start(self) -> None:
        """(Re)start the tool; line numbers restart with it."""
        argv = [self.tool, "-force", "-batch", "-"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)  # fmt: skip
        self.count = 0

    def apply(self, lines: list[str]) -> list[tuple[int, str]]:
        """(status, error) of each line, once the tool has done them all."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        first = self.count + 1
        self.count += len(lines) + 1
        try:
            self.proc.stdin.write("".join(x + "\n" for x in [*lines, MARKS[self.tool]]))
            self.proc.stdin.flush()
        except OSError as e:
            self.proc = None
            return [(1, f"{self.tool} -batch: {e}")] * len(lines)
        errors = self.read_until(self.count)
        return [(1 if n in errors else 0, errors.get(n, "")) for n in range(first, self.count)]

    def read_until(self, mark: int) -> dict[int, str]:
        """Line number -> message of each failed line, up to the marker's line."""
        assert self.proc is not None and self.proc.stderr is not None
        errors: dict[int, str] = {}
        said: list[str] = []
        while True:
            text = self.proc.stderr.readline()
            if not text:  # the tool died: every line not yet reported is unknown
                self.proc = None
                gone = f"{self.tool} -batch exited: {' '.join(said)[-200:]}"
                return {n: errors.get(n, gone) for n in range(mark - 1, 0, -1)}
            m = FAILED.match(text.strip())
            if m is None:
                said.append(text.strip())
            elif int(m.group(1)) == mark:
                return errors
            else:
                errors[int(m.group(1))] = " ".join(said)[:200]  # the first line names the problem
                said = []

    def close(self) -> None:
        """End of the schedule: EOF, then the tool exits."""
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            self.proc.wait()


def main() -> int:
    """Sleep until each group of changes is due, apply it, log it."""
    steps = json.loads(sys.argv[1])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # held until sigwait takes it
    tools = {tool: Batch(tool) for tool in ("tc", "ip") if any(s[1] == tool for s in steps)}
    for b in tools.values():
        b.start()  # started before the go: at t a change is a write
    print(json.dumps({"event": "ready", "realtime": time.time()}), flush=True)
    signal.sigwait({signal.SIGUSR1})
    t0, r0 = time.monotonic(), time.time()
    print(json.dumps({"event": "start", "realtime": r0}), flush=True)
    i = 0
    while i < len(steps):
        due = steps[i][0]
        group = [s for s in steps[i:] if s[0] == due]
        i += len(group)
        wait = t0 + due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        for tool in ("tc", "ip"):
            batch = [s for s in group if s[1] == tool]
            if batch:
                apply(tools[tool], batch, t0, r0)
    for b in tools.values():
        b.close()
    return 0


def apply(tool: Batch, batch: list[list[Any]], t0: float, r0: float) -> None:
    """The lines due together through the open batch; one log line per change."""
    issued = time.monotonic() - t0
    results = tool.apply([s[2] for s in batch])
    end = time.monotonic() - t0
    for s, (rc, err) in zip(batch, results):  # noqa: B905 - a lab host's Python may predate strict=
        entry = {"event": "change", "t": s[0], "issued": round(issued, 6), "done": round(end, 6)}
        entry.update(realtime=round(r0 + end, 6), tool=tool.tool, line=s[2], label=s[3])
        entry.update(rc=rc, err=err)
        print(json.dumps(entry), flush=True)


if __name__ == "__main__":
    sys.exit(main())
