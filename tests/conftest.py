"""Suite-wide test configuration: integration tests run after unit tests."""

from __future__ import annotations

import pytest


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
