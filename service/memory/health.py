"""What /health (and the console's health page) reports: each dependency's check, the write path's figures, and the
embedder, extractor and LLM provider the start-up built."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from service.core.errors import DependencyUnavailable
from service.core.loop import PUBLISH_S
from service.core.settings import WritePathSettings
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


class LoopFigures(Protocol):
    async def loops(self, max_age_s: float) -> list[dict[str, Any]]:
        """Each process's event-loop figures (service/core/loop.py `snapshot`), written in the last `max_age_s`."""


class QueueAge(Protocol):
    async def oldest_pending_age_s(self) -> float: ...


class Slowness:
    """Slow is not down (docs/write-path.md "Slowness is not an outage"): an event loop whose lag stayed over
    LOOP_LAG_DEGRADED_SECONDS ("event_loop": "slow"), or a task not ended for over QUEUE_AGE_DEGRADED_SECONDS
    ("queue": "behind"), makes /health "degraded" with 200: writes are still accepted and will complete."""

    def __init__(self, settings: WritePathSettings, loops: LoopFigures, queue: QueueAge) -> None:
        self.settings, self.figures, self.queue = settings, loops, queue

    async def checks(self, write_path: WritePathHealth) -> dict[str, str]:
        loops = await self.figures.loops(max_age_s=3 * PUBLISH_S)
        age = await self.queue.oldest_pending_age_s()
        write_path.loops = loops
        write_path.oldest_task_age_s = round(age, 1)
        slow = any(float(rec.get("lag_s", 0)) >= self.settings.loop_lag_degraded_seconds for rec in loops)
        return {"event_loop": "slow" if slow else "ok",
                "queue": "behind" if age >= self.settings.queue_age_degraded_seconds else "ok"}


class HealthCheck:
    def __init__(self, profile: str, timeout_s: float, redis: Pingable, vectors: Pingable, graph: Pingable,
                 backlog: Backlog, embedder: Named, extractor: Any, llm: Any = None, *,
                 slowness: Slowness | None = None) -> None:
        """`extractor`: the one the start-up built (service/deps.py build_ai); `llm`: the OpenAI-compatible provider
        when there is one (service/schemas/health.py `describe_llm`)."""
        self.profile, self.timeout_s = profile, timeout_s
        self.pings = {"redis": redis, "vector_store": vectors, "graph_store": graph}
        self.backlog, self.embedder, self.extractor, self.llm = backlog, embedder, extractor, llm
        self.slowness = slowness

    async def report(self, admin: bool) -> HealthResponse:
        """Each dependency's check is "ok" or "down"; the reasons (`errors`) only for an admin, since they can name
        hosts and configuration. With Redis up, "event_loop" ("ok" or "slow") and "queue" ("ok" or "behind") say
        whether the service is slow (Slowness). `status` is "degraded" when any check is not "ok"; `down` names
        the dependencies that are down (the route answers 503 only then)."""
        results = await asyncio.gather(*(_check(p.ping, self.timeout_s) for p in self.pings.values()))
        raw = dict(zip(self.pings, results, strict=True))
        checks = {k: "ok" if v == "ok" else "down" for k, v in raw.items()}
        write_path = WritePathHealth()
        if checks["redis"] == "ok":
            try:
                write_path = await self.backlog.write_path_stats()
                if self.slowness is not None:
                    checks.update(await self.slowness.checks(write_path))
            except DependencyUnavailable as exc:  # Redis went away between the two calls: the figures stay unset
                log.warning("health_write_path_unavailable", error=str(exc)[:300])
        return HealthResponse(
            status="ok" if all(v == "ok" for v in checks.values()) else "degraded",
            down=[k for k, v in checks.items() if v == "down"],
            service=SERVICE_NAME,
            profile=self.profile,
            checks=checks,
            embedder=self.embedder.name,
            extractor=self.extractor.name,  # the extractor the start-up built, not a guess
            llm=await describe_llm(self.extractor, admin, self.llm),  # provider, models, modes
            write_path=write_path,
            errors={k: v for k, v in raw.items() if v != "ok"} if admin else None,
        )
