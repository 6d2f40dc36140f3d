from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """A real local HTTP server of `app` (aiohttp's) on a free port, while the block runs: its base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/unit/" in str(item.path):
            item.add_marker(pytest.mark.unit)
