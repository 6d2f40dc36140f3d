"""The console's graph pages: the graph view and a node's neighbours, an entity with its facts and traces,
merges, the duplicate review queue, communities, fact search."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from service.schemas.curation import MergeRequest, ReviewRequest
from service.schemas.search import GraphSearchRequest
from service.stores.vector import MemoryFilter
from service.ui.graph import neighbourhood
from service.ui.graph import view as graph_view
from service.ui.render import PAGE, build, call, console_router, render
from service.ui.session import (
    ConsoleDep,
    form_of,
)

router = console_router()
ENTITY_MEMORIES = 100  # the newest memories an entity's page lists


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
    """An entity: the memories that mention it (newest first), its facts over time, its merges; `into` finds the
    entities it could be merged into."""
    user, graph = console.acting(), console.deps.graph
    found = await call(graph.console.entities(user, [entity_id]))
    if not found:
        raise HTTPException(status_code=404, detail=f"unknown entity '{entity_id}'")
    entity = found[0]
    rows, _ = await call(graph.facts.entity_facts(user, [entity_id], include_history=True, limit=500, live_ends=False))
    facts = sorted((r["fact"] for r in rows), key=lambda f: str(f.get("valid_at") or f.get("created_at") or ""))
    merged_here = await call(graph.console.merged_entities(user, entity_id, 100))
    target = await call(graph.console.entities(user, [str(entity["merged_into"])])) if entity.get("merged_into") else []
    found = await call(graph.console.find_entities(user, into, 20)) if into else []
    candidates = [e for e in found if e["id"] != entity_id]
    ids = await call(graph.console.entity_memories(user, entity_id, ENTITY_MEMORIES))
    seen = MemoryFilter(user_id=user, all_scopes=True)  # the session's tenant and sensitivity ceiling
    by_id = {m.id: m for m in await call(console.deps.vectors.get(ids)) if seen.matches(m)}
    memories = [by_id[i] for i in ids if i in by_id]
    return render(request, "entity.html", console, e=entity, facts=facts, merged_here=merged_here,
                  target=target[0] if target else None, into=into or "", candidates=candidates, memories=memories,
                  more_memories=len(ids) >= ENTITY_MEMORIES)


@router.post("/entities/merge")
async def merge(request: Request, console: ConsoleDep) -> Response:
    form = await form_of(request)
    req = build(MergeRequest, source_id=form.get("source_id"), target_id=form.get("target_id"))
    await call(console.deps.curation.merge_entities(req, console.acting()))
    return RedirectResponse(f"/ui/entities/{req.source_id}", status_code=303)


@router.post("/entities/{entity_id}/unmerge")
async def unmerge(request: Request, entity_id: str, console: ConsoleDep) -> Response:
    await call(console.deps.curation.unmerge_entity(entity_id, console.acting()))
    back = (await form_of(request)).get("back", "")
    return RedirectResponse(back if back == "/ui/review" else f"/ui/entities/{entity_id}", status_code=303)


# --- review queue ---------------------------------------------------------------------------------------------------

@router.get("/review", response_class=HTMLResponse)
async def review_queue(request: Request, console: ConsoleDep,
                       cursor: Annotated[str | None, Query(max_length=512)] = None) -> Response:
    user = console.acting()
    page = await call(console.deps.curation.list_duplicates(user, None, PAGE, cursor))
    merged = await call(console.deps.graph.console.merged_entities(user, None, 100))
    targets = await call(console.deps.graph.console.entities(user, sorted({str(e["merged_into"]) for e in merged})))
    return render(request, "review.html", console, pairs=page.items, next_cursor=page.next_cursor, merged=merged,
                  names={str(e["id"]): str(e.get("name")) for e in targets})


@router.post("/review")
async def review(request: Request, console: ConsoleDep) -> Response:
    form = await form_of(request)
    req = build(ReviewRequest, source_id=form.get("source_id"), target_id=form.get("target_id"),
                confirm=form.get("decision") == "confirm", reviewer="console")
    await call(console.deps.curation.review_duplicate(req, console.acting()))
    return RedirectResponse("/ui/review", status_code=303)


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
    found = await call(console.deps.graph_reads.graph_search(req, console.acting()))
    return render(request, "graph_facts.html", console, q=q, facts=found.results)
