"""The runner's signal handling: SIGINT/SIGTERM become Interrupted while a campaign runs,
and wait while teardown and bundle commits finish (they must not be cut in half).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived: tear down, record, exit 128 + signal."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


_deferred: list[int] = []


_defer_depth = [0]


def _on_signal(signum: int, _frame: Any) -> None:
    if _defer_depth[0]:
        _deferred.append(signum)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_deferred(*, reraise: bool = True) -> Iterator[None]:
    """Teardown and commits must finish: a signal arriving meanwhile is raised afterwards
    (or dropped, when an interruption is already being handled)."""
    _defer_depth[0] += 1
    try:
        yield
    finally:
        _defer_depth[0] -= 1
    if not _defer_depth[0] and _deferred:
        signum = _deferred.pop(0)
        _deferred.clear()
        if reraise:
            raise Interrupted(signum)


@contextlib.contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """SIGINT/SIGTERM raise Interrupted in the main thread while the runner works."""
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """SIGINT/SIGTERM are noted, not acted on, while the body runs (rig teardown must
    finish); the caller sees them in the yielded list."""
    got: list[int] = []
    old = {
        s: signal.signal(s, lambda n, _f: got.append(n)) for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield got
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
