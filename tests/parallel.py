"""`make test`: two pytest processes side by side, the unit tests then the VM tests in
one, the native integration tests in the other.

The VM modules (marker `vm`) keep one emulated guest busy for about 28 minutes; every
campaign they run in the guest is a measurement and runs while the other process waits
(tests/quiet.py), so what overlaps is the boots and the checks. Two measurements, the
guest's campaigns and the native traffic tests, cannot share 2 cores: the wall is at least
the quiet sections (17 minutes in a clean-clone run on 2026-12-07) plus the native tests'
own time. The unit tests (8-9 minutes, one core, no measurement) used to run in the other
process, before its native tests, and waited through the quiet sections too: stop 43's CI
took 52.8 minutes (the VM tests 34.3). In the VM process they wait for nothing, and the VM
tests start after them: 37.8 minutes in that clean-clone run. One after the other
everything took 57-62 minutes; each campaign's rig is built before its quiet section
(vmcampaign.rig_up: about 44 s each under emulation).

The native tests print here as they run; the unit and VM tests write to
build/test-logs/vm.log (follow it with `tail -f`), which is printed when both are done.
Extra arguments go to both pytest processes. Exit status: the first non-zero of the two,
else 0; a selection that collects nothing (pytest's 5) is a failure here too.

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
# The unit tests run in the VM process, before its VM tests (tests/conftest.py's order): the
# other process waits through every quiet section, so 9 minutes of unit tests there were
# 9 minutes on the wall (stop 43's CI: the others 52.8 minutes, the VM tests 34.3). They
# touch no kernel state (stand-ins, temporary directories); tests/ansible, which builds
# namespace rigs and registers BPF programs, stays with the native integration tests.
SELECTIONS = {
    "vm": ["-m", "not long and (vm or not integration)", "tests/unit", "tests/integration"],
    "other": ["-m", "not vm and not long", "--ignore=tests/unit", "tests"],
}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def main(extra: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", "-rfEs", "--durations=25", *extra]
    LOG.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    locks = str(LOG.parent.resolve())  # tests/quiet.py: the VM tests' measurements run alone
    with LOG.open("w") as log:
        argv = [*pytest, *SELECTIONS["vm"]]
        env = {**os.environ, QUIET: locks}
        vm = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    print(f"The VM tests run alongside (pid {vm.pid}): tail -f {LOG}", flush=True)
    try:
        other = subprocess.call([*pytest, *SELECTIONS["other"]],
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
