"""The timed agent: applies a run's scheduled changes on one host during the traffic.

Sent as `python3 -c` (a lab host needs Python, not mprig), started in the run's set-up: it
says `ready` once Python is up (seconds under VM emulation) and waits for SIGUSR1, which
the runner sends in the traffic stage just before the traffic client starts: that signal
is the timeline's t = 0 on every host. argv[1] is the schedule as JSON: [[t_s, tool, line,
label], ...] sorted by t_s, tool "tc" or "ip"; the lines due at one moment run through one
`<tool> -force -batch -`.
One JSON line per change goes to stdout (the bundle's timeline-<host>.jsonl): scheduled
time, when it was issued and done (monotonic seconds since the signal), the realtime of
the signal, its exit status. Standard library only.
"""

import json
import signal
import subprocess
import sys
import time
from typing import Any


def main() -> int:
    """Sleep until each group of changes is due, apply it, log it."""
    steps = json.loads(sys.argv[1])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # held until sigwait takes it
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
                apply(tool, batch, t0, r0)
    return 0


def apply(tool: str, batch: list[list[Any]], t0: float, r0: float) -> None:
    """One `tool -batch` for the lines due together; one log line per change."""
    issued = time.monotonic() - t0
    text = "".join(s[2] + "\n" for s in batch)
    done = subprocess.run(
        [tool, "-force", "-batch", "-"], input=text, capture_output=True, text=True, check=False
    )
    end = time.monotonic() - t0
    for s in batch:
        entry = {"event": "change", "t": s[0], "issued": round(issued, 6), "done": round(end, 6)}
        entry.update(realtime=round(r0 + end, 6), tool=tool, line=s[2], label=s[3])
        entry.update(rc=done.returncode, err=done.stderr.strip()[-200:])
        print(json.dumps(entry), flush=True)


if __name__ == "__main__":
    sys.exit(main())
