"""The console's pages: sign in, the user, memories (list, search, edit, delete), a task followed to its end,
conversations and runs. Thin handlers: read the form or query, call the same service objects the API routes call
(`deps.memories`, `deps.search`, `deps.intake`, `deps.conversations`, `deps.runs`) for the session's user, render
a template.
Writes answer with the task's page, which follows the task to its end (htmx polling). The graph's pages are
graph_pages.py, the operator's admin_pages.py; what they share, render.py."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.core.auth import ApiKeyStore
from service.core.domain import CATEGORIES, Scope
from service.core.errors import NotFound, ServiceError, Unauthorized
from service.deps import Deps
from service.schemas.memories import BulkDeleteRequest, UpdateMemoryRequest
from service.schemas.search import SearchRequest
from service.search.context_format import days
from service.ui.render import PAGE, build, call, console_router, follow, render, valid_user
from service.ui.session import (
    ConsoleDep,
    check_csrf,
    clear_session,
    form_of,
    new_session,
    read_session,
    set_session,
)

router = console_router()


# --- sign in ------------------------------------------------------------------------------------------------------

@router.get("", response_class=HTMLResponse)
async def home() -> Response:
    return RedirectResponse("/ui/memories", status_code=303)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request) -> Response:
    session = read_session(request) or new_session()
    deps: Deps = request.app.state.deps
    response = render(request, "login.html", csrf=session.csrf, no_keys=deps.settings.resolved_auth_mode == "none")
    set_session(request, response, session)
    return response


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    deps: Deps = request.app.state.deps
    session = read_session(request)
    await check_csrf(request, session)
    form = await form_of(request)
    key, user = form.get("api_key", "").strip(), form.get("user_id", "").strip() or None
    no_keys = deps.settings.resolved_auth_mode == "none"
    try:
        if key:
            record = await ApiKeyStore(deps.redis, deps.settings.redis).verify(key)
            fresh = new_session(key=key, user=valid_user(user) if record.admin and user else record.user_id)
        elif no_keys and user:
            fresh = new_session(user=valid_user(user))
        else:
            raise Unauthorized("paste an API key" + (" or name a user id" if no_keys else ""))
    except ServiceError as exc:
        assert session is not None  # check_csrf passed
        return render(request, "login.html", csrf=session.csrf, no_keys=no_keys, error=str(exc),
                      status=exc.status_code)
    response = RedirectResponse("/ui/memories", status_code=303)
    set_session(request, response, fresh)  # a new CSRF token at sign-in
    return response


@router.post("/logout")
async def logout(console: ConsoleDep) -> Response:
    response = RedirectResponse("/ui/login", status_code=303)
    clear_session(response)
    return response


@router.get("/user", response_class=HTMLResponse)
async def pick_user(request: Request, console: ConsoleDep) -> Response:
    return render(request, "user.html", console)


@router.post("/user")
async def switch_user(request: Request, console: ConsoleDep) -> Response:
    """An admin key (or AUTH_MODE=none) acts for the user it names."""
    user = (await form_of(request)).get("user_id", "").strip()
    if not console.can_switch:
        raise HTTPException(status_code=403, detail="this API key acts only for its own user")
    response = RedirectResponse("/ui/memories", status_code=303)
    set_session(request, response, console.with_user(valid_user(user)))
    return response


# --- memories -----------------------------------------------------------------------------------------------------

@router.get("/memories", response_class=HTMLResponse)
async def memories(
    request: Request, console: ConsoleDep,
    category: Annotated[str | None, Query(max_length=64)] = None,
    scope: Annotated[str | None, Query(pattern="^(global|project)?$")] = None,
    project_id: Annotated[str | None, Query(max_length=128)] = None,
    agent_id: Annotated[str | None, Query(max_length=128)] = None,
    text: Annotated[str | None, Query(max_length=2000)] = None,
    after: Annotated[str | None, Query(max_length=40)] = None,
    before: Annotated[str | None, Query(max_length=40)] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Response:
    """The list with filters, newest first. Text filters: only the memories that hold one of its words (the lexical
    retriever, best match first); a time range alone keeps the memories of that time (the time retriever)."""
    user = console.acting()
    filters = {k: v for k, v in {"category": category, "scope": scope, "project_id": project_id,
                                  "agent_id": agent_id, "text": text, "after": after, "before": before}.items() if v}
    items: list[Any]
    next_cursor = None
    if text or after or before:
        req = build(SearchRequest, query=text or "*", project_id=project_id, after=after, before=before, limit=100,
                    categories=[category] if category else None, retrievers=["lexical"] if text else ["time"])
        found = await call(console.deps.search.search(req, user))
        items = [r for r in found.results if (not scope or r.scope == scope)
                 and (not agent_id or r.agent_id == agent_id)]
    else:
        page = await call(console.deps.memories.list_memories(
            user, scope=Scope(scope) if scope else None, category=category or None, project_id=project_id or None,
            agent_id=agent_id or None, limit=PAGE, cursor=cursor or None))
        items, next_cursor = page.memories, page.next_cursor
    more = f"/ui/memories?{urlencode({**filters, 'cursor': next_cursor})}" if next_cursor else None
    return render(request, "memories.html", console, items=items, filters=filters, more=more,
                  categories=list(CATEGORIES), searched=bool(text or after or before))


@router.get("/search", response_class=HTMLResponse)
async def search(request: Request, console: ConsoleDep,
                 q: Annotated[str | None, Query(max_length=2000)] = None,
                 project_id: Annotated[str | None, Query(max_length=128)] = None) -> Response:
    """The same search as POST /v1/search; each result with its score and, in words, why it came back."""
    results = None
    weaker: list[Any] = []
    if q:
        req = build(SearchRequest, query=q, project_id=project_id, limit=20)
        found = (await call(console.deps.search.search(req, console.acting()))).results
        results = [r for r in found if not r.below_floor]
        weaker = [r for r in found if r.below_floor]  # under a fold: probably unrelated (the relevance floor)
    return render(request, "search.html", console, q=q or "", project_id=project_id or "", results=results,
                  weaker=weaker)


@router.get("/memories/{memory_id}", response_class=HTMLResponse)
async def memory_page(request: Request, memory_id: str, console: ConsoleDep) -> Response:
    user = console.acting()
    memory = await call(console.deps.memories.get_memory(memory_id, user))
    stored = await call(console.deps.vectors.get([memory_id]))  # get_memory checked the owner
    task_id = stored[0].task_id if stored else None
    mentioned = (await call(console.deps.graph.reads.mentions_of(user, [memory_id]))).get(memory_id, [])
    entities = await call(console.deps.graph.console.entities(user, mentioned))
    facts = await call(console.deps.graph.console.memory_facts(user, memory_id, 200))
    said, event = days(memory.occurred_at, memory.created_at, memory.metadata)
    return render(request, "memory.html", console, m=memory, task_id=task_id, entities=entities, facts=facts,
                  said=said, event=event,
                  categories=list(CATEGORIES), metadata=json.dumps(memory.metadata, indent=2, ensure_ascii=False))


@router.post("/memories/{memory_id}/edit")
async def edit_memory(request: Request, memory_id: str, console: ConsoleDep) -> Response:
    form = await form_of(request)
    user = console.acting()
    req = build(UpdateMemoryRequest, content=form.get("content", ""), category=form.get("category"))
    accepted = await call(console.deps.intake.submit_update(memory_id, req, user))
    return follow(accepted.task_id, f"/ui/memories/{memory_id}")


@router.get("/memories/{memory_id}/delete", response_class=HTMLResponse)
async def confirm_delete(request: Request, memory_id: str, console: ConsoleDep) -> Response:
    memory = await call(console.deps.memories.get_memory(memory_id, console.acting()))
    return render(request, "confirm_delete.html", console, m=memory)


@router.post("/memories/{memory_id}/delete")
async def delete_memory(request: Request, memory_id: str, console: ConsoleDep) -> Response:
    accepted = await call(console.deps.intake.submit_delete(memory_id, console.acting()))
    return follow(accepted.task_id, "/ui/memories")


@router.post("/memories/delete", response_class=HTMLResponse)
async def delete_by_filter(request: Request, console: ConsoleDep) -> Response:
    """Step one counts what the filter matches (the same listing the API pages through); step two (confirm=yes)
    deletes through the queue, as POST /v1/memories/delete does."""
    form = await form_of(request)
    user = console.acting()
    fields = {k: form[k] for k in ("scope", "category", "project_id", "agent_id") if form.get(k)}
    req = build(BulkDeleteRequest, **fields)  # the API's rules first
    if not fields:
        raise HTTPException(status_code=400, detail="choose at least one filter (category, scope, project, agent)")
    if form.get("confirm") != "yes":
        count, cursor = 0, None
        for _ in range(400):  # bounded: 400 pages of 100
            page = await call(console.deps.memories.list_memories(
                user, scope=Scope(fields["scope"]) if fields.get("scope") else None, category=fields.get("category"),
                project_id=fields.get("project_id"), agent_id=fields.get("agent_id"), limit=100, cursor=cursor))
            count += len(page.memories)
            cursor = page.next_cursor
            if cursor is None:
                break
        return render(request, "confirm_bulk.html", console, fields=fields, count=count, capped=cursor is not None)
    accepted = await call(console.deps.intake.submit_bulk_delete(req, user))
    return follow(accepted.task_id, "/ui/memories")


# --- tasks --------------------------------------------------------------------------------------------------------

@router.get("/tasks/{task_id}", response_class=HTMLResponse)
async def task_page(request: Request, task_id: str, console: ConsoleDep,
                    next: Annotated[str, Query(max_length=300, pattern=r"^/ui/[A-Za-z0-9/_\-]*$")] = "/ui/memories",
                    fragment: bool = False) -> Response:
    """A task followed to its end: the fragment polls itself (htmx) until completed or failed, then shows the
    memory as it is now (an edit) or the error."""
    user = console.acting()
    task = await call(console.deps.memories.task_status(task_id, user))
    memory = None
    if task.status == "completed" and next.startswith("/ui/memories/"):
        try:
            memory = await console.deps.memories.get_memory(next.rsplit("/", 1)[1], user)
        except NotFound:
            memory = None
    name = "task_status.html" if fragment else "task.html"
    return render(request, name, console, task=task, next=next, memory=memory,
                  done=task.status in ("completed", "failed"))


# --- the other tiers ------------------------------------------------------------------------------------------------

@router.get("/conversations", response_class=HTMLResponse)
async def conversations(request: Request, console: ConsoleDep) -> Response:
    page = await call(console.deps.conversations.list_sessions(console.acting(), None, PAGE, None))
    return render(request, "conversations.html", console, page=page.model_dump(mode="json"))


@router.get("/conversations/{session_id}", response_class=HTMLResponse)
async def conversation(request: Request, session_id: str, console: ConsoleDep) -> Response:
    found = await call(console.deps.conversations.messages(console.acting(), session_id, 100, None))
    return render(request, "conversation.html", console, session_id=session_id, page=found.model_dump(mode="json"))


@router.get("/runs", response_class=HTMLResponse)
async def runs(request: Request, console: ConsoleDep) -> Response:
    page = await call(console.deps.runs.list_runs(console.acting(), None, None, PAGE, None))
    return render(request, "runs.html", console, page=page.model_dump(mode="json"))


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run(request: Request, run_id: str, console: ConsoleDep) -> Response:
    found = await call(console.deps.runs.get_run(run_id, console.acting()))
    return render(request, "task_run.html", console, r=found.model_dump(mode="json"))
