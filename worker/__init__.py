"""The ARQ worker. Server profile: `python -m worker [--shard K]` (worker/__main__.py), or `arq
worker.WorkerSettings` (one queue: shard 0's).

In the embedded profile the API process runs the same worker in-process (`python -m service` hands
worker/embedded.py to the app as its start-up hook). Importing this package reads no settings:
`WorkerSettings` is built on first access, when ARQ's CLI asks for it.
"""

from __future__ import annotations

from typing import Any

from service.core.settings import Settings, load_settings


async def startup(ctx: dict[str, Any]) -> None:
    from worker.embedded import open_deps
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
