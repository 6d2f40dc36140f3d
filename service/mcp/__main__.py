"""`python -m service.mcp`: the MCP server over stdio, for `claude mcp add <name> -- <command>`.

A separate process from the API: in the embedded profile the API owns the Qdrant Edge shard (one
process per data dir), so this server opens no store. Each tool is one request to the running API
(MEMORY_API_URL, default http://127.0.0.1:<PORT>), whose routes call the same service objects.
stdout carries the protocol; logs go to stderr.

Agents start it in *their* working directory (the user's project), whose `.env` is not ours: the
settings come from the environment and this checkout's `.env`, as for `./scripts/dev.sh`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from service.core.logging import configure_logging
from service.core.settings import Settings, load_settings
from service.mcp.server import build_server

if TYPE_CHECKING:
    from service.mcp.backend import ApiBackend

log = structlog.get_logger(__name__)

CHECKOUT_ENV = Path(__file__).resolve().parents[2] / ".env"


def api_url(settings: Settings) -> str:
    return settings.mcp.api_url or f"http://127.0.0.1:{settings.service.port}"


async def serve_stdio(settings: Settings) -> None:
    """The server answers `initialize` and `tools/list` before the HTTP client to the API exists: it is made at the
    first tool call (its imports cost about a tenth of a second of the start an agent waits for) and lives as long
    as the server."""
    key = settings.mcp.api_key.get_secret_value() if settings.mcp.api_key else None
    made: list[ApiBackend] = []

    def backend() -> ApiBackend:
        if not made:
            from service.mcp.backend import ApiBackend

            made.append(ApiBackend(api_url(settings), api_key=key))
        return made[0]

    try:
        log.info("mcp_stdio_started", api=api_url(settings))
        await build_server(backend, settings.mcp.toolsets).run_stdio_async()
    finally:
        for made_backend in made:
            await made_backend.aclose()
        log.info("mcp_stdio_stopped")


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(
        prog="python -m service.mcp",
        description="The memory-platform MCP server over stdio (for `claude mcp add memory -- python -m "
                    "service.mcp`). Each tool is one request to the running API: MEMORY_API_URL (default "
                    "http://127.0.0.1:<PORT>) with MEMORY_API_KEY. stdout carries the protocol; logs go to stderr.",
    ).parse_args(sys.argv[1:] if argv is None else argv)  # --help prints and exits before anything starts
    settings = load_settings(_env_file=CHECKOUT_ENV)
    configure_logging(settings.service)
    anyio.run(serve_stdio, settings)


if __name__ == "__main__":
    main()
