"""The ARQ worker. Server profile: `arq worker.WorkerSettings` (or `python -m worker`).

In the embedded profile the API process runs the same worker in-process (service/app.py).
"""

from __future__ import annotations

from typing import Any

from service.deps import build_deps
from service.logging import configure_logging
from service.settings import Settings
from worker.settings import worker_options

_settings = Settings()


async def startup(ctx: dict[str, Any]) -> None:
    configure_logging(_settings)
    if _settings.qdrant_url is None:
        raise SystemExit(
            "error: a standalone worker needs QDRANT_URL (a Qdrant server); in the embedded profile the "
            "API runs the worker in-process - start it with ./scripts/dev.sh or python -m service"
        )
    ctx["deps"] = await build_deps(_settings)


async def shutdown(ctx: dict[str, Any]) -> None:
    deps = ctx.get("deps")
    if deps is not None:
        await deps.close()


# Read by `arq worker.WorkerSettings` (ARQ takes the class attributes as Worker arguments).
WorkerSettings = type(
    "WorkerSettings", (), {**worker_options(_settings), "on_startup": startup, "on_shutdown": shutdown}
)
