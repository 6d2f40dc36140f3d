"""Integration fixtures: a real app (real ARQ worker in-process, real Redis, Neo4j, Qdrant Edge)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from fastapi import FastAPI

from service.app import create_app
from service.deps import Deps
from service.search.searcher import Searcher
from tests.conftest import make_settings
from worker.embedded import EmbeddedWorker

REQUIRED = ("TEST_REDIS_URL", "TEST_NEO4J_URI")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def _services_configured() -> None:
    # Not a skip: integration tests need the services that scripts/test.sh starts.
    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not set: run the suite with ./scripts/test.sh")


@contextlib.asynccontextmanager
async def running_app(tmp: Path, **overrides: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    """Start the whole app (lifespan included: stores, embedded ARQ worker) and a client for it."""
    app: FastAPI = create_app(make_settings(tmp, **overrides), EmbeddedWorker)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=30) as client:
            yield client, app.state.deps


@pytest.fixture(scope="session")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    async with running_app(tmp_path_factory.mktemp("app")) as pair:
        yield pair


@pytest.fixture(scope="session")
def client(stack: tuple[httpx.AsyncClient, Deps]) -> httpx.AsyncClient:
    return stack[0]


@pytest.fixture(scope="session")
def deps(stack: tuple[httpx.AsyncClient, Deps]) -> Deps:
    return stack[1]


async def wait_task(client: httpx.AsyncClient, task_id: str, timeout: float = 30) -> dict[str, Any]:
    """Poll a task until it is completed or failed; returns the status body."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        resp = await client.get(f"/v1/memories/status/{task_id}")
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        if not seen or seen[-1] != body["status"]:
            seen.append(body["status"])
        if body["status"] in ("completed", "failed"):
            body["_seen"] = seen
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} not finished after {timeout}s (statuses seen: {seen})")


async def write_raw(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/memories/raw", json=body)
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    return done


def searcher_of(deps: Deps) -> Searcher:
    """The search's fused retrieval as deps.py built it (service/search/searcher.py), for tests that call its
    parts; `MemorySearch` holds it through the narrow `Finder` Protocol."""
    return cast(Searcher, deps.search.searcher)
