"""What /health (and the console's health page) reports: each dependency's check, the write path's figures, and the
embedder, extractor and LLM provider the start-up built."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from service.core.errors import DependencyUnavailable
from service.memory.backlog import Backlog
from service.schemas.health import describe_llm
from service.schemas.memories import HealthResponse, WritePathHealth

log = structlog.get_logger(__name__)

SERVICE_NAME = "memory-platform"  # the product's one name (pyproject, /health, MCP, queue, collection)


class Pingable(Protocol):
    async def ping(self) -> None:
        """Raise if the dependency cannot serve requests."""


class Named(Protocol):
    name: str


async def _check(ping: Callable[[], Awaitable[None]], limit_s: float) -> str:
    try:
        async with asyncio.timeout(limit_s):
            await ping()
        return "ok"
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"[:300]


class HealthCheck:
    def __init__(self, profile: str, timeout_s: float, redis: Pingable, vectors: Pingable, graph: Pingable,
                 backlog: Backlog, embedder: Named, extractor: Any, llm: Any = None) -> None:
        """`extractor`: the one the start-up built (service/deps.py build_ai); `llm`: the OpenAI-compatible provider
        when there is one (service/schemas/health.py `describe_llm`)."""
        self.profile, self.timeout_s = profile, timeout_s
        self.pings = {"redis": redis, "vector_store": vectors, "graph_store": graph}
        self.backlog, self.embedder, self.extractor, self.llm = backlog, embedder, extractor, llm

    async def report(self, admin: bool) -> HealthResponse:
        """Each check is "ok" or "down"; the reasons (`errors`) only for an admin, since they can name hosts and
        configuration. `status` is "degraded" when any check is down."""
        results = await asyncio.gather(*(_check(p.ping, self.timeout_s) for p in self.pings.values()))
        raw = dict(zip(self.pings, results, strict=True))
        checks = {k: "ok" if v == "ok" else "down" for k, v in raw.items()}
        write_path = WritePathHealth()
        if checks["redis"] == "ok":
            try:
                write_path = await self.backlog.write_path_stats()
            except DependencyUnavailable as exc:  # Redis went away between the two calls: the figures stay unset
                log.warning("health_write_path_unavailable", error=str(exc)[:300])
        return HealthResponse(
            status="ok" if all(v == "ok" for v in checks.values()) else "degraded",
            service=SERVICE_NAME,
            profile=self.profile,
            checks=checks,
            embedder=self.embedder.name,
            extractor=self.extractor.name,  # the extractor the start-up built, not a guess
            llm=await describe_llm(self.extractor, admin, self.llm),  # provider, models, modes
            write_path=write_path,
            errors={k: v for k, v in raw.items() if v != "ok"} if admin else None,
        )
