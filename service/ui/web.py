"""Install the web console on the app: its pages (/ui), its static files (/ui/static, vendored libraries included),
/docs and /redoc served from the vendored swagger-ui-dist and redoc (they work without a network), and the
security headers of every HTML answer (a Content-Security-Policy without inline scripts)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.core.settings import ConsoleSettings
from service.ui.paths import STATIC
from service.ui.session import SessionCodec

STATIC_URL = "/ui/static"

# The console: its own scripts only; styles from its own sheets (htmx's indicator styles are turned off).
CONSOLE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
               "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# Swagger UI and Redoc: scripts from here only too; Redoc's styled-components add <style> elements and its search
# runs in a blob: worker.
DOCS_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "worker-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
            "frame-ancestors 'none'")


class SecurityHeaders:
    """CSP and friends on the console's and the docs' answers (plain ASGI, like RequestContext)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        policy = CONSOLE_CSP if path == "/ui" or path.startswith("/ui/") else (
            DOCS_CSP if path in ("/docs", "/redoc") else None)
        if policy is None:
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [
                    *message.get("headers", []), (b"content-security-policy", policy.encode()),
                    (b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin")]}
            await send(message)

        await self.app(scope, receive, with_headers)


DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} - Swagger UI</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="{static}/vendor/swagger-ui/swagger-ui.css">
</head><body>
<div id="swagger-ui" data-openapi-url="{openapi}" data-oauth2-redirect-url="/docs/oauth2-redirect"></div>
<script src="{static}/vendor/swagger-ui/swagger-ui-bundle.js"></script>
<script src="{static}/docs.js"></script>
</body></html>
"""

REDOC_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} - ReDoc</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
</head><body>
<redoc spec-url="{openapi}"></redoc>
<script src="{static}/vendor/redoc/redoc.standalone.js"></script>
</body></html>
"""


def install_console(app: FastAPI, console: ConsoleSettings, pages: Sequence[APIRouter]) -> None:
    """Called by the app factory with the console's page routers (service/ui/pages.py, graph_pages.py,
    admin_pages.py); the app must be built with docs_url=None and redoc_url=None."""
    secret = console.session_secret.get_secret_value().encode() if console.session_secret else (
        secrets.token_bytes(32))  # unset: sessions last as long as this process
    app.state.console_codec = SessionCodec(secret, console.session_hours * 3600)
    for router in pages:
        app.include_router(router)
    app.mount(STATIC_URL, StaticFiles(directory=STATIC), name="ui-static")
    app.add_middleware(SecurityHeaders)
    openapi_url = app.openapi_url or "/openapi.json"
    title = app.title.replace("<", "").replace(">", "").replace("&", "")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml",
                            headers={"Cache-Control": "public, max-age=86400"})

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return HTMLResponse(DOCS_PAGE.format(title=title, static=STATIC_URL, openapi=openapi_url))

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return HTMLResponse(REDOC_PAGE.format(title=title, static=STATIC_URL, openapi=openapi_url))
