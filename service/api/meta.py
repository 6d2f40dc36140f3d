"""Categories, metrics and health (service/memory/health.py)."""

from __future__ import annotations

import hmac

import structlog
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from service import routes
from service.api.declared import on
from service.api.deps import DepsDep
from service.api.errors import responses
from service.api.security import CallerDep
from service.core.auth import api_key_of, caller_of
from service.core.domain import CATEGORIES
from service.core.errors import DependencyUnavailable, Forbidden
from service.core.metrics import exposition
from service.schemas.memories import CategoryOut, HealthResponse

router = APIRouter(tags=["meta"])
log = structlog.get_logger(__name__)

@on(router, routes.CATEGORIES)
async def categories() -> list[CategoryOut]:
    return [
        CategoryOut(name=c.name, group=c.group, default_scope=c.default_scope, description=c.description)
        for c in CATEGORIES.values()
    ]


@on(router, routes.METRICS, response_class=Response,
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


@on(router, routes.HEALTH, responses={503: {"model": HealthResponse}})
async def health(deps: DepsDep, caller: CallerDep) -> JSONResponse:
    """Each dependency's check is "ok" or "down" (503 when one is down); "event_loop" and "queue" say whether the
    service is slow (200: slow is not down). The reasons (`errors`) only for an admin key, since they can name
    hosts and configuration."""
    body = await deps.health.report(caller.admin)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=503 if body.down else 200)
