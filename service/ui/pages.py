"""The console's pages. Thin handlers: read the form or query, call the same service objects the API routes call
(`deps.service`, `deps.intake`, the maintenance runs, the key store) for the session's user, render a template.
Writes answer with the task's page, which follows the task to its end (htmx polling)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, ValidationError

from service.api import meta
from service.auth import ApiKeyStore, Caller
from service.deps import Deps
from service.domain import CATEGORIES, ID_PATTERN, Scope
from service.errors import NotFound, ServiceError, Unauthorized
from service.maintenance.runs import make_runs, submit_dedup
from service.schemas import (
    BulkDeleteRequest,
    DedupRequest,
    GraphSearchRequest,
    MergeRequest,
    ReviewRequest,
    SearchRequest,
    UpdateMemoryRequest,
)
from service.ui.graph import neighbourhood
from service.ui.graph import view as graph_view
from service.ui.session import (
    ConsoleDep,
    check_csrf,
    clear_session,
    form_of,
    new_session,
    read_session,
    set_session,
)
from service.ui.web import HERE
from service.ui.words import describe_signal

templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["signal"] = describe_signal
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


router = APIRouter(prefix="/ui", include_in_schema=False, route_class=ConsoleRoute)


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
            record = await ApiKeyStore(deps.redis, deps.settings).verify(key)
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
    """The list with filters. With text or a time range it is the search (the list pages by id, the search by
    relevance within those filters)."""
    user = console.acting()
    filters = {k: v for k, v in {"category": category, "scope": scope, "project_id": project_id,
                                  "agent_id": agent_id, "text": text, "after": after, "before": before}.items() if v}
    items: list[Any]
    next_cursor = None
    if text or after or before:
        req = build(SearchRequest, query=text or "*", project_id=project_id, after=after, before=before, limit=100,
                    categories=[category] if category else None)
        found = await call(console.deps.service.search(req, user))
        items = [r for r in found.results if (not scope or r.scope == scope)
                 and (not agent_id or r.agent_id == agent_id)]
    else:
        page = await call(console.deps.service.list_memories(
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
    if q:
        req = build(SearchRequest, query=q, project_id=project_id, limit=20)
        results = (await call(console.deps.service.search(req, console.acting()))).results
    return render(request, "search.html", console, q=q or "", project_id=project_id or "", results=results)


@router.get("/memories/{memory_id}", response_class=HTMLResponse)
async def memory_page(request: Request, memory_id: str, console: ConsoleDep) -> Response:
    user = console.acting()
    memory = await call(console.deps.service.get_memory(memory_id, user))
    stored = await call(console.deps.vectors.get([memory_id]))  # get_memory checked the owner
    task_id = stored[0].task_id if stored else None
    mentioned = (await call(console.deps.graph.mentions_of(user, [memory_id]))).get(memory_id, [])
    entities = await call(console.deps.graph.entities(user, mentioned))
    facts = await call(console.deps.graph.memory_facts(user, memory_id, 200))
    return render(request, "memory.html", console, m=memory, task_id=task_id, entities=entities, facts=facts,
                  categories=list(CATEGORIES), metadata=json.dumps(memory.metadata, indent=2, ensure_ascii=False))


@router.post("/memories/{memory_id}/edit")
async def edit_memory(request: Request, memory_id: str, console: ConsoleDep) -> Response:
    form = await form_of(request)
    user = console.acting()
    req = build(UpdateMemoryRequest, content=form.get("content", ""), category=form.get("category"))
    accepted = await call(console.deps.intake.submit_update(memory_id, req, user))
    return _follow(accepted.task_id, f"/ui/memories/{memory_id}")


@router.get("/memories/{memory_id}/delete", response_class=HTMLResponse)
async def confirm_delete(request: Request, memory_id: str, console: ConsoleDep) -> Response:
    memory = await call(console.deps.service.get_memory(memory_id, console.acting()))
    return render(request, "confirm_delete.html", console, m=memory)


@router.post("/memories/{memory_id}/delete")
async def delete_memory(request: Request, memory_id: str, console: ConsoleDep) -> Response:
    accepted = await call(console.deps.intake.submit_delete(memory_id, console.acting()))
    return _follow(accepted.task_id, "/ui/memories")


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
            page = await call(console.deps.service.list_memories(
                user, scope=Scope(fields["scope"]) if fields.get("scope") else None, category=fields.get("category"),
                project_id=fields.get("project_id"), agent_id=fields.get("agent_id"), limit=100, cursor=cursor))
            count += len(page.memories)
            cursor = page.next_cursor
            if cursor is None:
                break
        return render(request, "confirm_bulk.html", console, fields=fields, count=count, capped=cursor is not None)
    accepted = await call(console.deps.intake.submit_bulk_delete(req, user))
    return _follow(accepted.task_id, "/ui/memories")


def _follow(task_id: str, then: str) -> Response:
    return RedirectResponse(f"/ui/tasks/{task_id}?{urlencode({'next': then})}", status_code=303)


# --- tasks --------------------------------------------------------------------------------------------------------

@router.get("/tasks/{task_id}", response_class=HTMLResponse)
async def task_page(request: Request, task_id: str, console: ConsoleDep,
                    next: Annotated[str, Query(max_length=300, pattern=r"^/ui/[A-Za-z0-9/_\-]*$")] = "/ui/memories",
                    fragment: bool = False) -> Response:
    """A task followed to its end: the fragment polls itself (htmx) until completed or failed, then shows the
    memory as it is now (an edit) or the error."""
    user = console.acting()
    task = await call(console.deps.service.task_status(task_id, user))
    memory = None
    if task.status == "completed" and next.startswith("/ui/memories/"):
        try:
            memory = await console.deps.service.get_memory(next.rsplit("/", 1)[1], user)
        except NotFound:
            memory = None
    name = "task_status.html" if fragment else "task.html"
    return render(request, name, console, task=task, next=next, memory=memory,
                  done=task.status in ("completed", "failed"))


# --- graph --------------------------------------------------------------------------------------------------------

@router.get("/graph", response_class=HTMLResponse)
async def graph(request: Request, console: ConsoleDep,
                q: Annotated[str | None, Query(max_length=200)] = None,
                history: bool = False) -> Response:
    """Entities and facts drawn with cytoscape (static/graph.js reads the page's JSON data): the entities whose name
    or alias contains `q` (else the most connected ones) and their neighbours; a click expands a node."""
    seeds, data = await call(graph_view(console.deps, console.acting(), q or "", history))
    return render(request, "graph.html", console, q=q or "", history=history, data=data, matches=seeds)


@router.get("/graph/neighbours/{entity_id}")
async def graph_neighbours(entity_id: str, console: ConsoleDep, history: bool = False) -> JSONResponse:
    """A node's facts and neighbours, for the graph page's click (JSON: the page's own data format)."""
    return JSONResponse(await call(neighbourhood(console.deps, console.acting(), entity_id, history)))


@router.get("/entities/{entity_id}", response_class=HTMLResponse)
async def entity_page(request: Request, entity_id: str, console: ConsoleDep,
                      into: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    """An entity: its facts over time, its merges; `into` finds the entities it could be merged into."""
    user, graph = console.acting(), console.deps.graph
    found = await call(graph.entities(user, [entity_id]))
    if not found:
        raise HTTPException(status_code=404, detail=f"unknown entity '{entity_id}'")
    entity = found[0]
    facts = sorted(await call(graph.facts_of_entities(user, [entity_id], True, 500, live_ends=False)),
                   key=lambda f: str(f.get("valid_at") or f.get("created_at") or ""))
    merged_here = await call(graph.merged_entities(user, entity_id, 100))
    target = await call(graph.entities(user, [str(entity["merged_into"])])) if entity.get("merged_into") else []
    candidates = [e for e in await call(graph.find_entities(user, into, 20)) if e["id"] != entity_id] if into else []
    return render(request, "entity.html", console, e=entity, facts=facts, merged_here=merged_here,
                  target=target[0] if target else None, into=into or "", candidates=candidates)


@router.post("/entities/merge")
async def merge(request: Request, console: ConsoleDep) -> Response:
    form = await form_of(request)
    req = build(MergeRequest, source_id=form.get("source_id"), target_id=form.get("target_id"))
    await call(console.deps.service.merge_entities(req, console.acting()))
    return RedirectResponse(f"/ui/entities/{req.source_id}", status_code=303)


@router.post("/entities/{entity_id}/unmerge")
async def unmerge(request: Request, entity_id: str, console: ConsoleDep) -> Response:
    await call(console.deps.service.unmerge_entity(entity_id, console.acting()))
    back = (await form_of(request)).get("back", "")
    return RedirectResponse(back if back == "/ui/review" else f"/ui/entities/{entity_id}", status_code=303)


# --- review queue ---------------------------------------------------------------------------------------------------

@router.get("/review", response_class=HTMLResponse)
async def review_queue(request: Request, console: ConsoleDep,
                       cursor: Annotated[str | None, Query(max_length=512)] = None) -> Response:
    user = console.acting()
    page = await call(console.deps.service.list_duplicates(user, None, PAGE, cursor))
    merged = await call(console.deps.graph.merged_entities(user, None, 100))
    targets = await call(console.deps.graph.entities(user, sorted({str(e["merged_into"]) for e in merged})))
    return render(request, "review.html", console, pairs=page.items, next_cursor=page.next_cursor, merged=merged,
                  names={str(e["id"]): str(e.get("name")) for e in targets})


@router.post("/review")
async def review(request: Request, console: ConsoleDep) -> Response:
    form = await form_of(request)
    req = build(ReviewRequest, source_id=form.get("source_id"), target_id=form.get("target_id"),
                confirm=form.get("decision") == "confirm", reviewer="console")
    await call(console.deps.service.review_duplicate(req, console.acting()))
    return RedirectResponse("/ui/review", status_code=303)


# --- activity, health, keys ---------------------------------------------------------------------------------------

@router.get("/activity", response_class=HTMLResponse)
async def activity(request: Request, console: ConsoleDep) -> Response:
    """The user's recent tasks (status, error, a link to each task's page); maintenance runs (dedup, reconcile)
    with their reports: all of them for an admin, the user's otherwise."""
    owner = None if console.admin else console.acting()
    tasks = await call(console.deps.tasks.recent(console.acting(), RECENT_TASKS))
    runs = await call(make_runs(console.deps).recent(50, only_user=owner))
    return render(request, "activity.html", console, tasks=tasks, runs=runs)


@router.get("/activity/{run_id}", response_class=HTMLResponse)
async def run_report(request: Request, run_id: str, console: ConsoleDep) -> Response:
    report = await call(make_runs(console.deps).get(run_id))
    if not console.admin and report.user_id != console.acting():
        raise HTTPException(status_code=404, detail=f"unknown maintenance run '{run_id}'")
    return render(request, "run.html", console, report=report,
                  body=json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False))


@router.post("/activity/dedup")
async def start_dedup(request: Request, console: ConsoleDep) -> Response:
    """Admin only: a dedup dry run for the session's user; the task page follows its progress."""
    if not console.admin:
        raise HTTPException(status_code=403, detail="a dedup run needs an admin key")
    accepted = await call(submit_dedup(console.deps, DedupRequest(user_id=console.acting(), dry_run=True)))
    return _follow(accepted.task_id, f"/ui/activity/{accepted.run_id}")


@router.get("/health", response_class=HTMLResponse)
async def health(request: Request, console: ConsoleDep) -> Response:
    """/health's own answer (the route's function, called as it is), the user's graph figures, key counters."""
    await console.deps.service.refresh_gauges()  # as /metrics does before it answers
    answer = await meta.health(console.deps, Caller(admin=True) if console.admin else console.caller)
    body = json.loads(bytes(answer.body))
    stats = await call(console.deps.service.graph_stats(console.acting(), None))
    return render(request, "health.html", console, health=body, ok=answer.status_code == 200, stats=stats,
                  counters=_counters(console.deps))


def _counters(deps: Deps) -> list[tuple[str, float]]:
    """A few of /metrics' counters, read from the same registry /metrics exposes."""
    from prometheus_client import REGISTRY

    wanted = ("memory_jobs", "memory_search", "memory_dedup", "memory_reconcile", "memory_outbox", "memory_queue")
    out: list[tuple[str, float]] = []
    for family in REGISTRY.collect():
        if family.name.startswith(wanted):
            for sample in family.samples:
                if sample.name.endswith(("_total", "_depth", "_age_seconds", "_count")):
                    labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                    out.append((sample.name + (f"{{{labels}}}" if labels else ""), sample.value))
    return out[:60]


@router.get("/keys", response_class=HTMLResponse)
async def keys(request: Request, console: ConsoleDep) -> Response:
    _admin(console.caller)
    listed = await call(ApiKeyStore(console.deps.redis, console.deps.settings).list())
    return render(request, "keys.html", console, keys=listed, secret=None)


@router.post("/keys", response_class=HTMLResponse)
async def create_key(request: Request, console: ConsoleDep) -> Response:
    """The new key's secret is shown once, in this answer only."""
    _admin(console.caller)
    form = await form_of(request)
    user = valid_user(form.get("user_id", "").strip())
    store = ApiKeyStore(console.deps.redis, console.deps.settings)
    record, secret = await call(store.create(user, (form.get("name") or "")[:128] or None, form.get("admin") == "on"))
    response = render(request, "keys.html", console, keys=await call(store.list()), secret=secret, created=record)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/keys/{key_id}/revoke")
async def revoke_key(key_id: str, console: ConsoleDep) -> Response:
    _admin(console.caller)
    await call(ApiKeyStore(console.deps.redis, console.deps.settings).revoke(key_id))
    return RedirectResponse("/ui/keys", status_code=303)


def _admin(caller: Caller) -> None:
    if caller.key_id is None or not caller.admin:
        raise HTTPException(status_code=403, detail="managing keys needs an admin key")


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


@router.get("/communities", response_class=HTMLResponse)
async def communities(request: Request, console: ConsoleDep,
                      cursor: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    """The user's entity communities as GET /v1/graph/communities lists them (biggest first), members linked."""
    page = await call(console.deps.graph_facts.communities(console.acting(), PAGE, cursor or None))
    more = f"/ui/communities?{urlencode({'cursor': page.next_cursor})}" if page.next_cursor else None
    return render(request, "communities.html", console, items=page.items, more=more)


@router.get("/graph/search", response_class=HTMLResponse)
async def graph_facts(request: Request, console: ConsoleDep, q: Annotated[str, Query(min_length=1, max_length=2000)]
                      ) -> Response:
    """Facts as POST /v1/graph/search finds them, history included."""
    req = build(GraphSearchRequest, query=q, include_history=True, limit=50)
    found = await call(console.deps.service.graph_search(req, console.acting()))
    return render(request, "graph_facts.html", console, q=q, facts=found.results)
