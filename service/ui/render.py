"""What every console page shares: the templates, the route class (a refusal is a page too), rendering, a service
call whose domain error becomes the page's error, the API's request models built from a form, the task page a
write answers with."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, ValidationError

from service.core.domain import ID_PATTERN
from service.core.errors import ServiceError
from service.ui.paths import TEMPLATES
from service.ui.words import describe_signal, when

templates = Jinja2Templates(directory=TEMPLATES)
templates.env.filters["signal"] = describe_signal
templates.env.filters["when"] = when
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
PAGE = 25
RECENT_TASKS = 50


class ConsoleRoute(APIRoute):
    """A console page: a refusal is a page too (the API's status code, its detail as text); a missing session is a
    redirect to the sign-in page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                return await handler(request)
            except HTTPException as exc:
                if exc.status_code == 303 and exc.headers:
                    return RedirectResponse(exc.headers["Location"], status_code=303, headers=exc.headers)
                return _error(request, exc.status_code, str(exc.detail))
            except RequestValidationError as exc:
                return _error(request, 400, "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                      for e in exc.errors()))

        return page


def _error(request: Request, status: int, detail: str) -> HTMLResponse:
    return templates.TemplateResponse(request, "error.html", {"status": status, "detail": detail, "console": None,
                                                              "csrf": ""}, status_code=status)


def console_router() -> APIRouter:
    """A router of console pages (under /ui, out of the OpenAPI schema, each a ConsoleRoute)."""
    return APIRouter(prefix="/ui", include_in_schema=False, route_class=ConsoleRoute)


def render(request: Request, name: str, console: Any = None, status: int = 200, **ctx: Any) -> HTMLResponse:
    ctx.update(console=console, csrf=console.session.csrf if console is not None else ctx.get("csrf", ""))
    return templates.TemplateResponse(request, name, ctx, status_code=status)


async def call(aw: Awaitable[T]) -> T:
    """A service call; its domain error becomes the page's error (the API's status codes)."""
    try:
        return await aw
    except ServiceError as exc:
        raise HTTPException(status_code=exc.status_code, detail=str(exc)) from exc


def build(model: type[M], **fields: Any) -> M:
    """The API's request model from a form or a query (its rules, its messages); blank fields are unset."""
    try:
        return model.model_validate({k: v for k, v in fields.items() if v not in (None, "")})
    except ValidationError as exc:
        raise HTTPException(status_code=400, detail="; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from exc


def valid_user(user: str) -> str:
    if not re.fullmatch(ID_PATTERN, user):
        raise HTTPException(status_code=400, detail="a user id is 1-128 characters of A-Z a-z 0-9 _ . : @ -")
    return user


def follow(task_id: str, then: str) -> Response:
    """A write's answer: the task's page, which follows the task to its end and then links to `then`."""
    return RedirectResponse(f"/ui/tasks/{task_id}?{urlencode({'next': then})}", status_code=303)

