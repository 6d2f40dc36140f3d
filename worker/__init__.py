"""The ARQ worker. Server profile: `python -m worker [--shard K]` (worker/standalone.py), or `arq
worker.WorkerSettings` (one queue: shard 0's).

In the embedded profile the API process runs the same worker in-process (`python -m service` hands
worker/embedded.py to the app as its start-up hook). Importing this package reads no settings:
`WorkerSettings` is built on first access, when ARQ's CLI asks for it.
"""

from __future__ import annotations

from typing import Any

from service.core.heap import freeze_startup_heap, track_gc_pauses
from service.core.logging import configure_logging
from service.core.settings import Settings, load_settings
from service.deps import Deps, build_deps


async def open_deps(settings: Settings) -> Deps:
    """A standalone worker's clients, metrics server and heap settings (`python -m worker`, `arq`)."""
    configure_logging(settings.service)
    if settings.qdrant.url is None:
        raise SystemExit(
            "error: a standalone worker needs QDRANT_URL (a Qdrant server); in the embedded profile the "
            "API runs the worker in-process - start it with ./scripts/dev.sh or python -m service"
        )
    deps = await build_deps(settings)
    if settings.metrics.worker_port:
        from prometheus_client import start_http_server

        start_http_server(settings.metrics.worker_port)  # the same metrics as the API's /metrics
    track_gc_pauses()
    freeze_startup_heap()  # only `python -m worker` / `arq` run this start-up (service/core/heap.py)
    return deps


async def startup(ctx: dict[str, Any]) -> None:
    from worker.handlers import worker_context

    ctx.update(worker_context(await open_deps(load_settings())))


async def shutdown(ctx: dict[str, Any]) -> None:
    deps = ctx.get("deps")
    if deps is not None:
        await deps.close()


def build_worker_settings(settings: Settings | None = None) -> type:
    from worker.embedded import worker_options

    options = worker_options(settings or load_settings())  # an invalid setting: one line and exit 1
    return type("WorkerSettings", (), {**options, "on_startup": startup, "on_shutdown": shutdown})


def __getattr__(name: str) -> Any:
    # Read by `arq worker.WorkerSettings` (ARQ takes the class attributes as Worker arguments).
    if name == "WorkerSettings":
        return build_worker_settings()
    raise AttributeError(name)
