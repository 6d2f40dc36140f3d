"""Typed FastAPI dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.deps import Deps
from service.memory import MemoryService


def get_deps(request: Request) -> Deps:
    deps: Deps = request.app.state.deps
    return deps


def get_service(request: Request) -> MemoryService:
    return get_deps(request).service


DepsDep = Annotated[Deps, Depends(get_deps)]
ServiceDep = Annotated[MemoryService, Depends(get_service)]
