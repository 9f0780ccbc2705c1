"""Suite-wide test configuration: integration tests run after unit tests; beside the VM
tests (tests/parallel.py), each test waits while a VM test measures (tests/quiet.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from quiet import yielding


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with yielding():
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
    # Stable sort: unit tests first, then integration tests, VM tests last; of those, the
    # modules of the shared VM (tests/integration/sharedvm.py) first, one after the other.
    items.sort(
        key=lambda i: (
            i.get_closest_marker("integration") is not None,
            i.get_closest_marker("vm") is not None,
            i.get_closest_marker("shared_vm") is None,
        )
    )
