"""The benches' smoke runs: each script under scripts/bench/ for a few seconds of real work. `scripts/test.sh` runs
this folder after the rest of the suite (one bench at a time to each free test process: pytest-xdist --dist load),
so their services, private stacks and CPU load cannot slow or flake the other tests; they need the same services."""

from __future__ import annotations

import pytest

from tests.integration.conftest import _services_configured  # noqa: F401 - the same check, autouse here too


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/benches/" in str(item.path):
            item.add_marker(pytest.mark.integration)
