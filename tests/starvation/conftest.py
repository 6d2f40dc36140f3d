"""The starvation tests: the real service on a CPU hogged on purpose. `scripts/test.sh` runs this folder on its own,
after the rest of the suite, so the hog cannot slow or flake other tests; they need the same services."""

from __future__ import annotations

import pytest

from tests.integration.conftest import _services_configured  # noqa: F401 - the same check, autouse here too


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/starvation/" in str(item.path):
            item.add_marker(pytest.mark.integration)
