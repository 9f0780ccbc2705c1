"""`make test`: the VM tests and all the others as two pytest processes side by side.

The VM modules (marker `vm`) keep one emulated guest busy for about 28 minutes and use
about 1.2 of a 2-core machine's cores (measured here: 58 % busy on average); the unit tests
(8 minutes, one core) and the native integration tests (about 21 minutes, mostly waiting on
real-time traffic) fit beside them. One after the other they took 57-62 minutes, over the
45-minute CI budget. Every campaign the VM tests run in the guest runs while the others
wait (tests/quiet.py), so what overlaps is the boots and the checks: 64 minutes on a fresh
clone on 2026-11-30 (VM tests 38 minutes, 27 of them alone in quiet sections; the others
about 37 minutes of their own), over the budget. Two measurements, the guest's campaigns
and the native traffic tests, cannot share 2 cores, so about 47 of those minutes are
serial; each campaign's rig is now built before its quiet section (vmcampaign.rig_up: about
44 s each under emulation).

The other tests print here as they run; the VM tests write to build/test-logs/vm.log
(follow it with `tail -f`), which is printed when both are done. Extra arguments go to both
pytest processes. Exit status: the first non-zero of the two, else 0; a selection that
collects nothing (pytest's 5) is a failure here too.

    python tests/parallel.py            # what `make test` runs
    python tests/parallel.py -x         # both stop at their first failure
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from quiet import QUIET, YIELD

LOG = Path("build/test-logs/vm.log")
SELECTIONS = {"vm": "vm and not long", "other": "not vm and not long"}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def main(extra: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", "-rfEs", "--durations=25", *extra]
    LOG.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    locks = str(LOG.parent.resolve())  # tests/quiet.py: the VM tests' measurements run alone
    with LOG.open("w") as log:
        argv = [*pytest, "-m", SELECTIONS["vm"], "tests"]
        env = {**os.environ, QUIET: locks}
        vm = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    print(f"The VM tests run alongside (pid {vm.pid}): tail -f {LOG}", flush=True)
    try:
        other = subprocess.call([*pytest, "-m", SELECTIONS["other"], "tests"],
                                env={**os.environ, YIELD: locks})  # fmt: skip
        other_s = time.monotonic() - start
        if vm.poll() is None:
            print(f"\nThe other tests are done; waiting for the VM tests ({LOG})", flush=True)
        vm_rc = vm.wait()
    except KeyboardInterrupt:
        # A Ctrl-C in the terminal reached both processes: the VM tests stop and their hook
        # shuts the VM down. Pass it on only when it has not (a second SIGINT would cut that
        # shutdown short).
        try:
            vm.wait(timeout=30)
        except subprocess.TimeoutExpired:
            vm.send_signal(signal.SIGINT)
            vm.wait()
        raise
    vm_s = time.monotonic() - start
    print(f"\n{'=' * 30} the VM tests ({LOG}) {'=' * 30}", flush=True)
    sys.stdout.write(LOG.read_text(errors="replace"))
    print(f"\nother tests: exit {other}, {_minutes(other_s)}; VM tests: exit {vm_rc}, "
          f"{_minutes(vm_s)}; wall {_minutes(time.monotonic() - start)}")  # fmt: skip
    return other or vm_rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
