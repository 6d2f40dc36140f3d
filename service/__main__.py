"""`python -m service`: serve the API (and, in the embedded profile, the ARQ worker in-process)."""

from __future__ import annotations

import uvicorn

from service.app import create_app
from service.settings import Settings
from worker.embedded import EmbeddedWorker


def main() -> None:
    settings = Settings()
    uvicorn.run(
        create_app(settings, EmbeddedWorker),
        host=settings.host,
        port=settings.port,
        log_config=None,  # structlog owns logging
        access_log=False,
        timeout_graceful_shutdown=15,
    )


if __name__ == "__main__":
    main()
