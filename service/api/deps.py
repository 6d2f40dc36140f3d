"""Typed FastAPI dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.deps import Deps
from service.memory import MemoryService


async def get_deps(request: Request) -> Deps:  # async: a plain def runs in the threadpool
    deps: Deps = request.app.state.deps
    return deps


async def get_service(request: Request) -> MemoryService:
    return (await get_deps(request)).service


DepsDep = Annotated[Deps, Depends(get_deps)]
ServiceDep = Annotated[MemoryService, Depends(get_service)]
