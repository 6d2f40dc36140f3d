"""An endpoint mounted on its declared route (service/routes.py): the router takes the route's method, path, status,
answer model and deprecation from the declaration, so none of them is written twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter

from service.routes import Route

F = TypeVar("F", bound=Callable[..., Any])


def on(router: APIRouter, route: Route[Any], **openapi: Any) -> Callable[[F], F]:
    """`@on(router, routes.GET_MEMORY, responses=responses(404))` over an endpoint; `openapi` adds documentation
    (error answers, other content types) or a response class."""
    if not route.path.startswith(router.prefix):
        raise ValueError(f"{route.method} {route.path} is not under the router's prefix {router.prefix}")
    mount: Callable[[F], F] = router.api_route(
        route.path.removeprefix(router.prefix), methods=[route.method], status_code=route.status,
        response_model=route.answer, deprecated=route.deprecated or None, **openapi)
    return mount
