"""Knowledge-graph reads: fact search and introspection (nodes, edges, episodes)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import ServiceDep
from service.api.params import Cursor, GraphProjectQuery, OptionalUserQuery, PageLimit
from service.api.security import CallerDep
from service.schemas import GraphPage, GraphSearchRequest, GraphSearchResponse

router = APIRouter(prefix="/v1/graph", tags=["graph"])



@router.post("/search", response_model=GraphSearchResponse)
async def graph_search(req: GraphSearchRequest, service: ServiceDep, caller: CallerDep) -> GraphSearchResponse:
    return await service.graph_search(req, caller.user(req.user_id))


@router.get("/nodes", response_model=GraphPage)
async def nodes(
    service: ServiceDep, caller: CallerDep, user_id: OptionalUserQuery = None, project_id: GraphProjectQuery = None,
    limit: PageLimit = 100, cursor: Cursor = None,
) -> GraphPage:
    page = await service.list_nodes(caller.user(user_id), project_id, limit, cursor)
    return GraphPage(items=page.items, next_cursor=page.next_cursor)


@router.get("/edges", response_model=GraphPage)
async def edges(
    service: ServiceDep,
    caller: CallerDep,
    user_id: OptionalUserQuery = None,
    project_id: GraphProjectQuery = None,
    limit: PageLimit = 100,
    cursor: Cursor = None,
    include_history: bool = False,
) -> GraphPage:
    page = await service.list_edges(caller.user(user_id), project_id, limit, cursor, include_history)
    return GraphPage(items=page.items, next_cursor=page.next_cursor)


@router.get("/episodes", response_model=GraphPage)
async def episodes(
    service: ServiceDep, caller: CallerDep, user_id: OptionalUserQuery = None, project_id: GraphProjectQuery = None,
    limit: PageLimit = 100, cursor: Cursor = None,
) -> GraphPage:
    page = await service.list_episodes(caller.user(user_id), project_id, limit, cursor)
    return GraphPage(items=page.items, next_cursor=page.next_cursor)
