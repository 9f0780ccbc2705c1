"""Integration-test hooks: the shared VM (sharedvm.py) stops after the last test that uses it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sharedvm import SHARED


def _shared(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("shared_vm") is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield  # the module's own fixtures are torn down first
    if _shared(item) and not _shared(nextitem):
        SHARED.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    SHARED.close()
