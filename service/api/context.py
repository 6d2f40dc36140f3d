"""Context: the user's global memories plus a project's, most useful for the session first, grouped by category;
within a token budget when `max_tokens` is given (service/search/context.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from service import routes
from service.api.declared import on
from service.api.deps import RunsDep, SearchDep
from service.api.params import OptionalUserQuery, ProjectPath, SessionQuery
from service.api.security import CallerDep
from service.runs.lessons import HEADING, lesson_line
from service.runs.schemas import ContextWithLessons
from service.schemas.memories import ContextResponse, ContextSection
from service.search.context_format import render_markdown

router = APIRouter(prefix="/v1/context", tags=["context"])

DEFAULT_CHARS = 4000
LESSONS_TITLE = HEADING.removeprefix("## ")  # a context section (service/search/context_format.py `heading`)
Format = Annotated[Literal["json", "markdown"], Query()]
MaxChars = Annotated[int | None, Query(ge=200, le=200_000, description=(
    "Bound of the markdown block in characters (default 4000 without max_tokens)"))]
MaxTokens = Annotated[int | None, Query(ge=50, le=100_000, description=(
    "Budget of the markdown block in tokens of the embedder's tokenizer: the most useful memories that fit "
    "(JSON: the same memories, `omitted` the rest)"))]
ContextQuery = Annotated[str | None, Query(min_length=1, max_length=2000, description=(
    "What the session is about: its search hits come first"))]


async def _context(
    search: SearchDep, runs: RunsDep, user_id: str, project_id: str | None, fmt: str, max_chars: int | None,
    max_tokens: int | None, query: str | None, session_id: str | None,
) -> ContextResponse | PlainTextResponse:
    found = await runs.lessons(user_id, project_id, session_id)  # lessons of earlier sessions (docs/runs.md)
    lessons = ContextSection(title=LESSONS_TITLE, lines=[lesson_line(lesson) for lesson in found])
    ctx = await search.context(user_id, project_id, max_tokens=max_tokens, query=query,
                                sections=[lessons] if found else [])
    if fmt == "markdown":
        bound = max_chars if max_chars is not None or max_tokens is not None else DEFAULT_CHARS
        return PlainTextResponse(render_markdown(ctx, bound), media_type="text/markdown")
    return ContextWithLessons(**ctx.model_dump(), lessons=found)


@on(router, routes.GLOBAL_CONTEXT, responses={200: {"content": {"text/markdown": {}}}})
async def global_context(
    search: SearchDep, runs: RunsDep, caller: CallerDep, user_id: OptionalUserQuery = None, format: Format = "json",
    max_chars: MaxChars = None, max_tokens: MaxTokens = None, query: ContextQuery = None,
    session_id: SessionQuery = None,
) -> ContextResponse | PlainTextResponse:
    return await _context(search, runs, caller.user(user_id), None, format, max_chars, max_tokens, query, session_id)


@on(router, routes.PROJECT_CONTEXT, responses={200: {"content": {"text/markdown": {}}}})
async def project_context(
    search: SearchDep,
    runs: RunsDep,
    caller: CallerDep,
    project_id: ProjectPath,
    user_id: OptionalUserQuery = None,
    format: Format = "json",
    max_chars: MaxChars = None,
    max_tokens: MaxTokens = None,
    query: ContextQuery = None,
    session_id: SessionQuery = None,
) -> ContextResponse | PlainTextResponse:
    return await _context(search, runs, caller.user(user_id), project_id, format, max_chars, max_tokens, query,
                          session_id)
