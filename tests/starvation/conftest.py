"""The starvation tests: the real service on a CPU hogged on purpose. `scripts/test.sh` runs this folder on its own,
after the rest of the suite, so the hog cannot slow or flake other tests; they need the same services."""

from __future__ import annotations

import os

import pytest

REQUIRED = ("TEST_REDIS_URL", "TEST_NEO4J_URI")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/starvation/" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def _services_configured() -> None:
    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not set: run the suite with ./scripts/test.sh")
