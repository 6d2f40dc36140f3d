"""Context: the user's global memories plus a project's, grouped by category."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from service.api.deps import ServiceDep
from service.api.params import OptionalUserQuery, ProjectPath
from service.api.runs import RunsDep, SessionQuery
from service.api.security import CallerDep
from service.context_format import render_markdown
from service.runs.lessons import ContextWithLessons, render_lessons
from service.schemas import ContextResponse

router = APIRouter(prefix="/v1/context", tags=["context"])

Format = Annotated[Literal["json", "markdown"], Query()]
MaxChars = Annotated[int, Query(ge=200, le=200_000, description="Bound of the markdown block")]


LESSON_SHARE = 4  # the "from earlier sessions" part gets at most 1/4 of the markdown bound


async def _context(
    service: ServiceDep, runs: RunsDep, user_id: str, project_id: str | None, fmt: str, max_chars: int,
    session_id: str | None,
) -> ContextResponse | PlainTextResponse:
    ctx = await service.context(user_id, project_id)
    found = await runs.lessons(user_id, project_id, session_id)  # lessons of earlier sessions (docs/runs.md)
    if fmt == "markdown":
        part = render_lessons(found, max_chars // LESSON_SHARE)
        text = render_markdown(ctx, max_chars - len(part) - 1 if part else max_chars)
        return PlainTextResponse(text + ("\n" + part if part else ""), media_type="text/markdown")
    return ContextWithLessons(**ctx.model_dump(), lessons=found)


@router.get("/global", response_model=ContextWithLessons, responses={200: {"content": {"text/markdown": {}}}})
async def global_context(
    service: ServiceDep, runs: RunsDep, caller: CallerDep, user_id: OptionalUserQuery = None, format: Format = "json",
    max_chars: MaxChars = 4000, session_id: SessionQuery = None,
) -> ContextResponse | PlainTextResponse:
    return await _context(service, runs, caller.user(user_id), None, format, max_chars, session_id)


@router.get("/{project_id}", response_model=ContextWithLessons, responses={200: {"content": {"text/markdown": {}}}})
async def project_context(
    service: ServiceDep,
    runs: RunsDep,
    caller: CallerDep,
    project_id: ProjectPath,
    user_id: OptionalUserQuery = None,
    format: Format = "json",
    max_chars: MaxChars = 4000,
    session_id: SessionQuery = None,
) -> ContextResponse | PlainTextResponse:
    return await _context(service, runs, caller.user(user_id), project_id, format, max_chars, session_id)
