"""The VM watchdog: a runner killed with kill -9 does not leave its VM behind.

Real processes stand in for the runner (a Python child) and the VM (a `sleep` in a session
of its own, as vng is started); no VM is booted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

CHILD = """
import subprocess, sys, time
from mprig.rig import vm
vm_proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
vm.kill_group_with_parent(vm_proc.pid)
print(vm_proc.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose: its parent (the killed runner) never reaped it.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def _wait_dead(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_the_vm_group_dies_when_the_runner_is_killed_with_sigkill() -> None:
    runner = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert runner.stdout is not None
    vm_pid = int(runner.stdout.readline())
    try:
        assert _alive(vm_pid)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        assert _wait_dead(vm_pid, 10.0), "the VM stand-in outlived its killed runner"
    finally:
        runner.stdout.close()
        if _alive(vm_pid):
            os.kill(vm_pid, signal.SIGKILL)


def test_the_watchdog_ends_by_itself_when_the_vm_exits() -> None:
    from mprig.rig import vm

    short = subprocess.Popen(["sleep", "0.5"], start_new_session=True)
    watchdog = vm.kill_group_with_parent(short.pid)
    short.wait()
    # The loop ended and, this process being alive, nothing was killed: status of `kill -0`.
    assert watchdog.wait(timeout=10) == 0
