"""App factory and lifespan: clients are created in the lifespan and closed there."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import structlog
from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api import (
    context,
    errors,
    graph,
    graph_api,
    legacy,
    maintenance,
    memories,
    meta,
    portability,
    search,
    tasks,
    traces,
)
from service.api.conversations import router as conversations_router
from service.api.runs import router as runs_router
from service.api.security import PUBLIC_PATHS, BodyLimit, HostCheck, get_caller
from service.core.auth import RateLimiter
from service.core.errors import ConfigError
from service.core.heap import freeze_startup_heap, track_gc_pauses
from service.core.logging import configure_logging
from service.core.metrics import HTTP_DURATION
from service.core.settings import Settings, load_settings
from service.deps import Deps, build_deps
from service.ui.web import install_console

log = structlog.get_logger(__name__)

PRODUCT_TITLE = "Memory platform for AI agents"  # the product's name: memory-platform (docs/api.md)


class BackgroundWorker(Protocol):
    """What the app runs beside the API in the embedded profile (worker/embedded.py's EmbeddedWorker)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


WorkerFactory = Callable[[Deps], BackgroundWorker]


class RequestContext:
    """Request id (`x-request-id`, echoed) in the logs' context and the request's duration metric, as plain
    ASGI: Starlette's BaseHTTPMiddleware runs every request in an extra task with memory streams."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(b"x-request-id")
        request_id = (sent.decode("latin-1") if sent else uuid.uuid4().hex)[:64]
        structlog.contextvars.bind_contextvars(request_id=request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", request_id.encode("latin-1"))]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            structlog.contextvars.unbind_contextvars("request_id")
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"  # the template, never the ids in a path
            HTTP_DURATION.labels(template, scope.get("method", ""), str(status)).observe(time.perf_counter() - started)


def create_app(settings: Settings | None = None, worker_factory: WorkerFactory | None = None, *,
               freeze_heap: bool = False) -> FastAPI:
    """The API. `worker_factory` is the start-up hook of the embedded profile: `python -m service`
    passes the in-process ARQ worker (service/ never imports worker/); it runs when
    settings.run_embedded_worker is true. `freeze_heap`: the start-up heap leaves the garbage collector's
    reach once started (service/core/heap.py); `python -m service` sets it, a test process does not."""
    settings = settings or load_settings()
    configure_logging(settings.service)
    track_gc_pauses()
    if settings.access.auth_mode == "none" and not settings.service.loopback:
        raise SystemExit(
            f"error: AUTH_MODE=none is allowed only on a loopback HOST (HOST={settings.service.host}): anyone who "
            "reaches the port would be every user. Set AUTH_MODE=keys and create a key: "
            "python -m service keys create ..."
        )
    if settings.run_embedded_worker and worker_factory is None:
        log.warning("no_embedded_worker", reason="the app was created without a worker factory: jobs queue up "
                    "until a worker (python -m worker) takes them")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            deps = await build_deps(settings)
        except ConfigError as exc:
            app.state.startup_error = exc  # `python -m service` prints it as one line (service/__main__.py)
            raise
        app.state.deps = deps
        app.state.rate_limiter = RateLimiter()
        await deps.search.warm_up()
        await deps.runs.warm_up()
        worker = worker_factory(deps) if settings.run_embedded_worker and worker_factory is not None else None
        if worker is not None:
            worker.start()
        if freeze_heap:
            freeze_startup_heap()
        log.info("service_started", host=settings.service.host, port=settings.service.port, profile=settings.profile)
        try:
            async with mcp_sessions() if mcp_sessions else contextlib.nullcontext():
                yield
        finally:
            if worker is not None:
                await worker.stop()
            await deps.close()
            log.info("service_stopped")

    app = FastAPI(
        title=PRODUCT_TITLE,
        version="0.1.0",
        lifespan=lifespan,
        description="Async memory writes (202 + task id), synchronous vector/graph reads. "
                    "Authentication: `Authorization: Bearer <API key>` (or `X-API-Key`).",
        dependencies=[Depends(get_caller)],  # every route, including ones added later (PUBLIC_PATHS aside)
        docs_url=None,  # /docs and /redoc come from vendored files with the console (service/ui/web.py)
        redoc_url=None,
    )

    app.add_middleware(RequestContext)

    errors.install(app)  # one error body for every 4xx/5xx (service/api/errors.py, docs/api.md)

    app.include_router(memories.router)
    app.include_router(search.router)
    app.include_router(graph.router)
    app.include_router(graph_api.router)  # the graph as an API
    app.include_router(context.router)
    app.include_router(meta.router)
    app.include_router(maintenance.router)
    app.include_router(portability.router)
    app.include_router(traces.router)
    app.include_router(runs_router)  # task traces
    app.include_router(conversations_router)  # conversations
    app.include_router(tasks.router)
    app.include_router(legacy.router)
    from service.ui import admin_pages, graph_pages, pages  # they import Jinja2: the module's import stays light

    # the web console at /ui, and /docs, /redoc (docs/console.md)
    install_console(app, settings.console, [pages.router, graph_pages.router, admin_pages.router])
    errors.document(app, PUBLIC_PATHS)  # each route's OpenAPI names exactly the errors it can answer
    if settings.access.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.access.cors_origins, allow_methods=["*"],
                           allow_headers=["Authorization", "X-API-Key", "Content-Type", "Idempotency-Key"])
    app.add_middleware(HostCheck, allowed_hosts=settings.resolved_allowed_hosts)
    # outermost: before anything reads the body; an import file may be larger than a request
    access = settings.access
    app.add_middleware(BodyLimit, limit=access.max_body_bytes, paths={"/v1/import": access.max_import_bytes})
    # MCP over streamable HTTP at /mcp/ (docs/agents.md); its session manager runs in the lifespan above.
    mcp_sessions = None
    if settings.mcp.transport == "http":
        from service.mcp.http import mount_http

        mcp_sessions = mount_http(app, settings.service, settings.mcp.toolsets)
    return app
