"""Knowledge-graph reads (fact search, nodes, edges, episodes, statistics) and entity curation (the duplicate
review queue, merge, unmerge: docs/identity.md)."""

from __future__ import annotations

from fastapi import APIRouter

from service import routes
from service.api.declared import on
from service.api.deps import CurationDep, GraphReadsDep, IntakeDep
from service.api.errors import responses
from service.api.idempotency import IdempotencyKey, fingerprint, remembered
from service.api.params import PAGE, Cursor, EntityId, GraphProjectQuery, OptionalUserQuery, PageLimit, PairCursor
from service.api.security import CallerDep
from service.core.sensitivity import lowered
from service.schemas.curation import (
    DuplicatePage,
    EntityChange,
    GraphStats,
    MergeRequest,
    ReviewRequest,
    UnmergeRequest,
)
from service.schemas.search import GraphPage, GraphSearchRequest, GraphSearchResponse

router = APIRouter(prefix="/v1/graph", tags=["graph"])



@on(router, routes.GRAPH_SEARCH)
async def graph_search(req: GraphSearchRequest, graph: GraphReadsDep, caller: CallerDep) -> GraphSearchResponse:
    with lowered(req.max_sensitivity):  # the body's own ceiling, below the key's
        return await graph.graph_search(req, caller.user(req.user_id))


@on(router, routes.GRAPH_NODES)
async def nodes(
    graph: GraphReadsDep, caller: CallerDep, user_id: OptionalUserQuery = None, project_id: GraphProjectQuery = None,
    limit: PageLimit = PAGE, cursor: Cursor = None,
) -> GraphPage:
    page = await graph.list_nodes(caller.user(user_id), project_id, limit, cursor)
    return GraphPage(items=page.items, next_cursor=page.next_cursor)


@on(router, routes.GRAPH_EDGES)
async def edges(
    graph: GraphReadsDep,
    caller: CallerDep,
    user_id: OptionalUserQuery = None,
    project_id: GraphProjectQuery = None,
    limit: PageLimit = PAGE,
    cursor: Cursor = None,
    include_history: bool = False,
) -> GraphPage:
    page = await graph.list_edges(caller.user(user_id), project_id, limit, cursor, include_history)
    return GraphPage(items=page.items, next_cursor=page.next_cursor)


@on(router, routes.GRAPH_EPISODES)
async def episodes(
    graph: GraphReadsDep, caller: CallerDep, user_id: OptionalUserQuery = None, project_id: GraphProjectQuery = None,
    limit: PageLimit = PAGE, cursor: Cursor = None,
) -> GraphPage:
    page = await graph.list_episodes(caller.user(user_id), project_id, limit, cursor)
    return GraphPage(items=page.items, next_cursor=page.next_cursor)


@on(router, routes.GRAPH_STATS)
async def stats(curation: CurationDep, caller: CallerDep, user_id: OptionalUserQuery = None,
                project_id: GraphProjectQuery = None) -> GraphStats:
    return await curation.graph_stats(caller.user(user_id), project_id)


@on(router, routes.DUPLICATES)
async def duplicates(
    curation: CurationDep, caller: CallerDep, user_id: OptionalUserQuery = None, project_id: GraphProjectQuery = None,
    limit: PageLimit = PAGE, cursor: PairCursor = None,
) -> DuplicatePage:
    """Entity pairs the resolution gate could not decide (pending review), highest score first."""
    return await curation.list_duplicates(caller.user(user_id), project_id, limit, cursor)


@on(router, routes.REVIEW, responses=responses(404, 409))
async def review(req: ReviewRequest, curation: CurationDep, intake: IntakeDep, caller: CallerDep,
                 idempotency_key: IdempotencyKey = None) -> EntityChange:
    """confirm=true merges source into target; confirm=false rejects the pair (never proposed again)."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/graph/duplicates/review", req.model_dump(mode="json"))
    return await remembered(intake, caller, user, idempotency_key, fp, lambda: curation.review_duplicate(req, user),
                            EntityChange)


@on(router, routes.MERGE, responses=responses(404, 409))
async def merge(req: MergeRequest, curation: CurationDep, intake: IntakeDep, caller: CallerDep,
                idempotency_key: IdempotencyKey = None) -> EntityChange:
    """Merge source into target (same user, same group, compatible types); idempotent, undone by unmerge."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/graph/entities/merge", req.model_dump(mode="json"))
    return await remembered(intake, caller, user, idempotency_key, fp, lambda: curation.merge_entities(req, user),
                            EntityChange)


@on(router, routes.UNMERGE, responses=responses(404, 409))
async def unmerge(entity_id: EntityId, req: UnmergeRequest, curation: CurationDep, intake: IntakeDep,
                  caller: CallerDep, idempotency_key: IdempotencyKey = None) -> EntityChange:
    user = caller.user(req.user_id)
    fp = fingerprint("POST", f"/v1/graph/entities/{entity_id}/unmerge", req.model_dump(mode="json"))
    return await remembered(intake, caller, user, idempotency_key, fp, lambda: curation.unmerge_entity(entity_id, user),
                            EntityChange)
