"""Categories and health."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable

import structlog
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from service.api.deps import DepsDep
from service.api.errors import responses
from service.api.security import CallerDep, api_key_of, caller_of
from service.core.domain import CATEGORIES
from service.core.errors import DependencyUnavailable, Forbidden
from service.core.metrics import exposition
from service.schemas.health import describe_llm
from service.schemas.memories import CategoryOut, HealthResponse, WritePathHealth

router = APIRouter(tags=["meta"])
log = structlog.get_logger(__name__)

SERVICE_NAME = "memory-platform"  # the product's one name (pyproject, /health, MCP, queue, collection)


@router.get("/v1/categories", response_model=list[CategoryOut])
async def categories() -> list[CategoryOut]:
    return [
        CategoryOut(name=c.name, group=c.group, default_scope=c.default_scope, description=c.description)
        for c in CATEGORIES.values()
    ]


async def _check(ping: Callable[[], Awaitable[None]], limit_s: float) -> str:
    try:
        async with asyncio.timeout(limit_s):
            await ping()
        return "ok"
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"[:300]


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}}, **responses(401, 403)})  # its own credentials check
async def metrics(deps: DepsDep, request: Request) -> Response:
    """Prometheus metrics. With AUTH_MODE=keys: an admin key, or `Authorization: Bearer <METRICS_TOKEN>`."""
    if deps.settings.resolved_auth_mode == "keys":
        token = api_key_of(request.headers)
        expected = deps.settings.metrics.token.get_secret_value() if deps.settings.metrics.token else None
        if not (token and expected and hmac.compare_digest(token, expected)):
            caller = await caller_of(deps, request.headers)
            if not caller.admin:
                raise Forbidden("/metrics needs an admin key or METRICS_TOKEN")
    try:
        await deps.backlog.refresh_gauges()
    except DependencyUnavailable as exc:  # the process's own counters are still worth answering with
        log.warning("metrics_gauges_unavailable", error=str(exc)[:200])
    body, content_type = exposition()
    return Response(body, media_type=content_type)


@router.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
async def health(deps: DepsDep, caller: CallerDep) -> JSONResponse:
    """Each check is "ok" or "down"; the reasons (`errors`) only for an admin key, since they can name
    hosts and configuration."""
    timeout = deps.settings.neo4j.timeout_seconds
    names = ("redis", "vector_store", "graph_store")
    results = await asyncio.gather(
        _check(deps.tasks.ping, timeout), _check(deps.vectors.ping, timeout), _check(deps.graph.ping, timeout)
    )
    raw = dict(zip(names, results, strict=True))
    checks = {k: "ok" if v == "ok" else "down" for k, v in raw.items()}
    errors = {k: v for k, v in raw.items() if v != "ok"} if caller.admin else None
    ok = all(v == "ok" for v in checks.values())
    write_path = WritePathHealth()
    if checks["redis"] == "ok":
        try:
            write_path = await deps.backlog.write_path_stats()
        except DependencyUnavailable as exc:  # Redis went away between the two calls: the figures stay unset
            log.warning("health_write_path_unavailable", error=str(exc)[:300])
    body = HealthResponse(
        status="ok" if ok else "degraded",
        service=SERVICE_NAME,
        profile=deps.settings.profile,
        checks=checks,
        embedder=deps.embedder.name,
        extractor=deps.extractor.name,  # the extractor the start-up built (service/deps.py build_ai), not a guess
        # provider, models, modes
        llm=await describe_llm(deps.extractor, caller.admin, deps.openai_llm),
        write_path=write_path,
        errors=errors,
    )
    return JSONResponse(body.model_dump(exclude_none=True), status_code=200 if ok else 503)
