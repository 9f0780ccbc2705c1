"""Quiet sections for `make test`'s two pytest processes (tests/parallel.py).

The VM tests run beside the others, but every campaign they run in the emulated guest is a
measurement that a busy host skews: in the first side-by-side run a deep FIFO's RTT under
load came out 114 ms against fq_codel's 30 (the check wants 4x), the ss sampler took 14
samples in a 10 s run (it wants 15), and the capture missed 42 of 618 out-of-order segments
the kernel counted; in a CI run where only those three ran alone, a paper campaign lost a
run and MPTCP over two paths fell to 0.99x TCP over one. So every campaign in the guest runs
in `quiet()` (tests/integration/vmcampaign.py, test_papers, test_run_vm, test_crosscheck_vm):
the other process finishes the test it is in and waits at the next one until the campaign is
done. The boot and the checks on the results overlap with the other tests.

Two lock files, so a waiting measurement is not starved: every other test takes GATE, then
LOCK shared, then lets GATE go, and holds LOCK until it ends; a measurement takes GATE (no
new test starts) and then LOCK exclusively (the running test has ended). tests/parallel.py
names the lock files' directory in MPRIG_TEST_QUIET for the VM process and MPRIG_TEST_YIELD
for the other; without them (a plain `pytest`, one process) both are no-ops. Each quiet
section adds a line to quiet.log there: how long the pause took to come, how long it lasted.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

QUIET, YIELD = "MPRIG_TEST_QUIET", "MPRIG_TEST_YIELD"  # the lock files' directory


def _files(env: str) -> tuple[Path, Path] | None:
    where = os.environ.get(env)
    return None if not where else (Path(where) / "quiet.gate", Path(where) / "quiet.lock")


@contextmanager
def quiet(what: str) -> Iterator[None]:
    """The other pytest process pauses at its next test until this block ends."""
    files = _files(QUIET)
    if files is None:
        yield
        return
    start = time.monotonic()
    with files[0].open("a") as gate, files[1].open("a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX)
        paused = time.monotonic()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
            with (files[0].parent / "quiet.log").open("a") as log:
                print(f"{what}: {paused - start:.0f} s for the other tests to pause, "
                      f"{time.monotonic() - paused:.0f} s alone", file=log)  # fmt: skip


@contextmanager
def yielding() -> Iterator[None]:
    """Around each test of the other process: waits while a quiet section runs."""
    files = _files(YIELD)
    if files is None:
        yield
        return
    with files[0].open("a") as gate, files[1].open("a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
