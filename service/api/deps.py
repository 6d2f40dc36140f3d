"""Typed FastAPI dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.deps import Deps
from service.memory import MemoryService
from service.memory.intake import Intake


async def get_deps(request: Request) -> Deps:  # async: a plain def runs in the threadpool
    deps: Deps = request.app.state.deps
    return deps


async def get_service(request: Request) -> MemoryService:
    return (await get_deps(request)).service


async def get_intake(request: Request) -> Intake:
    return (await get_deps(request)).intake


DepsDep = Annotated[Deps, Depends(get_deps)]
IntakeDep = Annotated[Intake, Depends(get_intake)]
ServiceDep = Annotated[MemoryService, Depends(get_service)]
