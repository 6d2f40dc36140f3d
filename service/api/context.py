"""Context: the user's global memories plus a project's, grouped by category."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from service.api.deps import ServiceDep
from service.api.params import OptionalUserQuery, ProjectPath
from service.api.security import CallerDep
from service.context_format import render_markdown
from service.schemas import ContextResponse

router = APIRouter(prefix="/v1/context", tags=["context"])

Format = Annotated[Literal["json", "markdown"], Query()]
MaxChars = Annotated[int, Query(ge=200, le=200_000, description="Bound of the markdown block")]


async def _context(
    service: ServiceDep, user_id: str, project_id: str | None, fmt: str, max_chars: int
) -> ContextResponse | PlainTextResponse:
    ctx = await service.context(user_id, project_id)
    if fmt == "markdown":
        return PlainTextResponse(render_markdown(ctx, max_chars), media_type="text/markdown")
    return ctx


@router.get("/global", response_model=ContextResponse, responses={200: {"content": {"text/markdown": {}}}})
async def global_context(
    service: ServiceDep, caller: CallerDep, user_id: OptionalUserQuery = None, format: Format = "json",
    max_chars: MaxChars = 4000,
) -> ContextResponse | PlainTextResponse:
    return await _context(service, caller.user(user_id), None, format, max_chars)


@router.get("/{project_id}", response_model=ContextResponse, responses={200: {"content": {"text/markdown": {}}}})
async def project_context(
    service: ServiceDep,
    caller: CallerDep,
    project_id: ProjectPath,
    user_id: OptionalUserQuery = None,
    format: Format = "json",
    max_chars: MaxChars = 4000,
) -> ContextResponse | PlainTextResponse:
    return await _context(service, caller.user(user_id), project_id, format, max_chars)
