"""Graph reads of the memory API: the graph search (facts and the communities of the entities a query names) and
the listings of nodes, edges and episodes."""

from __future__ import annotations

from service.memory.mapping import fact_out
from service.schemas.graph_api import community_item
from service.schemas.search import GraphSearchRequest, GraphSearchResponse
from service.stores.graph import GraphStore, RowPage, groups_for

GRAPH_SEARCH_COMMUNITIES = 3  # communities a graph search returns at most


class GraphReads:
    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph

    async def graph_search(self, req: GraphSearchRequest, user_id: str) -> GraphSearchResponse:
        """Graph facts only; unlike /v1/search a graph outage is an error (503), not a degradation."""
        facts = await self.graph.reads.search_facts(
            user_id, groups_for(req.project_id), req.query, req.limit, req.include_history
        )
        named = await self.graph.reads.query_entities(user_id, groups_for(req.project_id), req.query)
        communities = await self.graph.communities.communities_of(user_id, named,
                                                                  GRAPH_SEARCH_COMMUNITIES) if named else []
        return GraphSearchResponse(results=[fact_out(f) for f in facts],
                                   communities=[community_item(c) for c in communities])

    async def list_nodes(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> RowPage:
        return await self.graph.reads.list_nodes(user_id, groups_for(project_id) if project_id else None, limit, cursor)

    async def list_edges(
        self, user_id: str, project_id: str | None, limit: int, cursor: str | None, include_history: bool
    ) -> RowPage:
        groups = groups_for(project_id) if project_id else None
        return await self.graph.reads.list_edges(user_id, groups, limit, cursor, include_history)

    async def list_episodes(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> RowPage:
        return await self.graph.reads.list_episodes(user_id, groups_for(project_id) if project_id else None, limit,
                                                    cursor)
