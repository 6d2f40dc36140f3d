"""Every route of the API as a `Call` (`Routes`): the one definition both clients send."""

from __future__ import annotations

from typing import Any

from service.client.call import Call
from service.conversations.schemas import (
    MessagePage,
    MessageSearchRequest,
    MessageSearchResponse,
    SessionPage,
    SessionSummary,
)
from service.runs.schemas import (
    CompleteRequest,
    RunAccepted,
    RunOut,
    RunPage,
    RunRequest,
    RunSearchRequest,
    RunSearchResponse,
    RunStats,
    SearchWithReasoning,
    StepRequest,
    ToolCallRequest,
)
from service.schemas.curation import (
    DuplicatePage,
    EntityChange,
    GraphStats,
    MergeRequest,
    ReviewRequest,
    TraceOut,
    TracePage,
    UnmergeRequest,
)
from service.schemas.graph_api import (
    CommunityPage,
    CommunityRebuild,
    EntityFactsPage,
    EntityWrite,
    FactPage,
    FactWrite,
    GraphQuery,
    RelationWrite,
)
from service.schemas.maintenance import (
    DedupAccepted,
    DedupRequest,
    DedupRunReport,
    MaintenanceRunPage,
    ReconcileAccepted,
    ReconcileRequest,
    ReembedRequest,
)
from service.schemas.memories import (
    AcceptedResponse,
    BulkDeleteRequest,
    CategoryOut,
    ContextResponse,
    ConversationRequest,
    HealthResponse,
    MemoryPage,
    MemoryRecord,
    RawBatchRequest,
    RawMemoryItem,
    RawMemoryRequest,
    UpdateMemoryRequest,
)
from service.schemas.search import GraphPage, GraphSearchRequest, GraphSearchResponse, SearchRequest
from service.tasks.status import TaskResponse


def _user(user_id: str | None) -> dict[str, Any]:
    return {"user_id": user_id}


class Routes:
    """Every route of the API as a `Call` (the one place paths, parameters and answer models are written)."""

    # --- memories -------------------------------------------------------------------------------------------
    @staticmethod
    def add(content: str, *, category: str, user_id: str | None = None, **fields: Any) -> Call[AcceptedResponse]:
        body = RawMemoryRequest(content=content, category=category, user_id=user_id, **fields)
        return Call("POST", "/v1/memories/raw", AcceptedResponse, body=body)

    @staticmethod
    def add_batch(memories: list[RawMemoryItem | dict[str, Any]], *, user_id: str | None = None
                  ) -> Call[AcceptedResponse]:
        items = [m if isinstance(m, RawMemoryItem) else RawMemoryItem.model_validate(m) for m in memories]
        return Call("POST", "/v1/memories/raw/batch", AcceptedResponse,
                    body=RawBatchRequest(memories=items, user_id=user_id))

    @staticmethod
    def add_conversation(messages: list[dict[str, Any]], *, user_id: str | None = None, **fields: Any
                         ) -> Call[AcceptedResponse]:
        body = ConversationRequest.model_validate({"messages": messages, "user_id": user_id, **fields})
        return Call("POST", "/v1/memories", AcceptedResponse, body=body)

    @staticmethod
    def add_legacy(messages: list[dict[str, Any]], *, user_id: str | None = None, **fields: Any
                   ) -> Call[AcceptedResponse]:
        body = ConversationRequest.model_validate({"messages": messages, "user_id": user_id, **fields})
        return Call("POST", "/memories/async", AcceptedResponse, body=body)

    @staticmethod
    def task(task_id: str) -> Call[TaskResponse]:
        return Call("GET", f"/v1/tasks/{task_id}", TaskResponse)

    @staticmethod
    def memory_status(task_id: str) -> Call[TaskResponse]:
        return Call("GET", f"/v1/memories/status/{task_id}", TaskResponse)

    @staticmethod
    def legacy_status(task_id: str) -> Call[TaskResponse]:
        return Call("GET", f"/memories/status/{task_id}", TaskResponse)

    @staticmethod
    def memories(*, user_id: str | None = None, scope: str | None = None, category: str | None = None,
             project_id: str | None = None, agent_id: str | None = None, limit: int | None = None,
             cursor: str | None = None, include_superseded: bool | None = None,
             order: str | None = None) -> Call[MemoryPage]:
        """`order`: newest (the server's default), oldest or id."""
        return Call("GET", "/v1/memories", MemoryPage, params={
            "user_id": user_id, "scope": scope, "category": category, "project_id": project_id,
            "agent_id": agent_id, "limit": limit, "cursor": cursor, "order": order,
            "include_superseded": None if include_superseded is None else str(include_superseded).lower()})

    @staticmethod
    def get(memory_id: str, *, user_id: str | None = None) -> Call[MemoryRecord]:
        return Call("GET", f"/v1/memories/{memory_id}", MemoryRecord, params=_user(user_id))

    @staticmethod
    def update(memory_id: str, content: str, *, user_id: str | None = None, category: str | None = None
               ) -> Call[AcceptedResponse]:
        body = UpdateMemoryRequest(content=content, user_id=user_id, category=category)
        return Call("PUT", f"/v1/memories/{memory_id}", AcceptedResponse, body=body)

    @staticmethod
    def delete(memory_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("DELETE", f"/v1/memories/{memory_id}", AcceptedResponse, params=_user(user_id))

    @staticmethod
    def delete_many(*, user_id: str | None = None, **fields: Any) -> Call[AcceptedResponse]:
        body = BulkDeleteRequest.model_validate({"user_id": user_id, **fields})
        return Call("POST", "/v1/memories/delete", AcceptedResponse, body=body)

    # --- reads ---------------------------------------------------------------------------------------------
    @staticmethod
    def search(query: str, *, user_id: str | None = None, **fields: Any) -> Call[SearchWithReasoning]:
        body = SearchRequest.model_validate({"query": query, "user_id": user_id, **fields})
        return Call("POST", "/v1/search", SearchWithReasoning, body=body)

    @staticmethod
    def context(project_id: str | None = None, *, user_id: str | None = None) -> Call[ContextResponse]:
        return Call("GET", f"/v1/context/{project_id or 'global'}", ContextResponse, params=_user(user_id))

    @staticmethod
    def context_markdown(project_id: str | None = None, *, user_id: str | None = None,
                         max_chars: int | None = None) -> Call[str]:
        return Call("GET", f"/v1/context/{project_id or 'global'}", None,
                    params={"user_id": user_id, "format": "markdown", "max_chars": max_chars})

    @staticmethod
    def categories() -> Call[list[CategoryOut]]:
        return Call("GET", "/v1/categories", list[CategoryOut])

    @staticmethod
    def health() -> Call[HealthResponse]:
        return Call("GET", "/health", HealthResponse, accept=(503,))

    @staticmethod
    def metrics() -> Call[str]:
        return Call("GET", "/metrics", None)

    # --- graph -----------------------------------------------------------------------------------------------
    @staticmethod
    def graph_search(query: str, *, user_id: str | None = None, **fields: Any) -> Call[GraphSearchResponse]:
        body = GraphSearchRequest.model_validate({"query": query, "user_id": user_id, **fields})
        return Call("POST", "/v1/graph/search", GraphSearchResponse, body=body)

    @staticmethod
    def graph(kind: str, *, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
              cursor: str | None = None, **extra: Any) -> Call[GraphPage]:
        """kind: nodes, edges or episodes."""
        return Call("GET", f"/v1/graph/{kind}", GraphPage, params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor, **extra})

    @staticmethod
    def graph_stats(*, user_id: str | None = None, project_id: str | None = None) -> Call[GraphStats]:
        return Call("GET", "/v1/graph/stats", GraphStats, params={"user_id": user_id, "project_id": project_id})

    @staticmethod
    def duplicates(*, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
                   cursor: str | None = None) -> Call[DuplicatePage]:
        return Call("GET", "/v1/graph/duplicates", DuplicatePage, params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def review(source_id: str, target_id: str, confirm: bool, *, user_id: str | None = None) -> Call[EntityChange]:
        body = ReviewRequest(source_id=source_id, target_id=target_id, confirm=confirm, user_id=user_id)
        return Call("POST", "/v1/graph/duplicates/review", EntityChange, body=body)

    @staticmethod
    def merge(source_id: str, target_id: str, *, user_id: str | None = None) -> Call[EntityChange]:
        body = MergeRequest(source_id=source_id, target_id=target_id, user_id=user_id)
        return Call("POST", "/v1/graph/entities/merge", EntityChange, body=body)

    @staticmethod
    def unmerge(entity_id: str, *, user_id: str | None = None) -> Call[EntityChange]:
        return Call("POST", f"/v1/graph/entities/{entity_id}/unmerge", EntityChange,
                    body=UnmergeRequest(user_id=user_id))

    # --- the graph as an API (docs/graph.md) ------------------------------------------------------------------
    @staticmethod
    def add_entity(body: EntityWrite) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/graph/entities", AcceptedResponse, body=body)

    @staticmethod
    def add_relation(body: RelationWrite) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/graph/relations", AcceptedResponse, body=body)

    @staticmethod
    def add_fact(body: FactWrite) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/graph/facts", AcceptedResponse, body=body)

    @staticmethod
    def facts(*, name: str | None = None, entity_id: str | None = None, user_id: str | None = None,
              project_id: str | None = None, include_history: bool | None = None, limit: int | None = None,
              cursor: str | None = None) -> Call[EntityFactsPage]:
        return Call("GET", "/v1/graph/facts", EntityFactsPage, params={
            "name": name, "entity_id": entity_id, "user_id": user_id, "project_id": project_id,
            "include_history": include_history, "limit": limit, "cursor": cursor})

    @staticmethod
    def entity_facts(entity_id: str, *, user_id: str | None = None, include_history: bool | None = None,
                     limit: int | None = None, cursor: str | None = None) -> Call[EntityFactsPage]:
        return Call("GET", f"/v1/graph/entities/{entity_id}/facts", EntityFactsPage, params={
            "user_id": user_id, "include_history": include_history, "limit": limit, "cursor": cursor})

    @staticmethod
    def query_graph(body: GraphQuery) -> Call[FactPage]:
        return Call("POST", "/v1/graph/query", FactPage, body=body)

    @staticmethod
    def communities(*, user_id: str | None = None, limit: int | None = None, cursor: str | None = None
                    ) -> Call[CommunityPage]:
        return Call("GET", "/v1/graph/communities", CommunityPage,
                    params={"user_id": user_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def rebuild_communities(*, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/graph/communities/rebuild", AcceptedResponse, body=CommunityRebuild(user_id=user_id))

    @staticmethod
    def traces(*, user_id: str | None = None, entity_id: str | None = None, limit: int | None = None,
               cursor: str | None = None) -> Call[TracePage]:
        return Call("GET", "/v1/traces", TracePage, params={
            "user_id": user_id, "entity_id": entity_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def trace(trace_id: str, *, user_id: str | None = None) -> Call[TraceOut]:
        return Call("GET", f"/v1/traces/{trace_id}", TraceOut, params=_user(user_id))

    # --- export, import, maintenance -------------------------------------------------------------------------
    @staticmethod
    def export(*, user_id: str | None = None, project_id: str | None = None, include_vectors: bool = False
               ) -> Call[str]:
        return Call("GET", "/v1/export", None, params={
            "user_id": user_id, "project_id": project_id, "include_vectors": include_vectors or None})

    @staticmethod
    def import_file(data: bytes) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/import", AcceptedResponse, content=data)

    @staticmethod
    def dedup(*, user_id: str | None = None, dry_run: bool = False) -> Call[DedupAccepted]:
        return Call("POST", "/v1/maintenance/dedup", DedupAccepted, body=DedupRequest(user_id=user_id,
                                                                                       dry_run=dry_run))

    @staticmethod
    def reconcile(*, user_id: str | None = None, dry_run: bool = False) -> Call[ReconcileAccepted]:
        return Call("POST", "/v1/maintenance/reconcile", ReconcileAccepted,
                    body=ReconcileRequest(user_id=user_id, dry_run=dry_run))

    @staticmethod
    def reembed(*, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/maintenance/reembed", AcceptedResponse, body=ReembedRequest(user_id=user_id))

    @staticmethod
    def optimize() -> Call[AcceptedResponse]:
        return Call("POST", "/v1/maintenance/optimize", AcceptedResponse)

    @staticmethod
    def maintenance_runs(*, limit: int | None = None, cursor: str | None = None) -> Call[MaintenanceRunPage]:
        return Call("GET", "/v1/maintenance/runs", MaintenanceRunPage, params={"limit": limit, "cursor": cursor})

    @staticmethod
    def maintenance_run(run_id: str) -> Call[DedupRunReport]:
        return Call("GET", f"/v1/maintenance/runs/{run_id}", DedupRunReport)

    # --- task traces (runs) and conversations ----------------------------------------------------------------
    @staticmethod
    def start_run(req: RunRequest) -> Call[RunAccepted]:
        return Call("POST", "/v1/runs", RunAccepted, body=req)

    @staticmethod
    def runs(*, user_id: str | None = None, session_id: str | None = None, project_id: str | None = None,
             limit: int | None = None, cursor: str | None = None) -> Call[RunPage]:
        return Call("GET", "/v1/runs", RunPage, params={"user_id": user_id, "session_id": session_id,
                                                         "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def search_runs(req: RunSearchRequest) -> Call[RunSearchResponse]:
        return Call("POST", "/v1/runs/search", RunSearchResponse, body=req)

    @staticmethod
    def run_stats(*, user_id: str | None = None, project_id: str | None = None) -> Call[RunStats]:
        return Call("GET", "/v1/runs/stats", RunStats, params={"user_id": user_id, "project_id": project_id})

    @staticmethod
    def run(run_id: str, *, user_id: str | None = None) -> Call[RunOut]:
        return Call("GET", f"/v1/runs/{run_id}", RunOut, params=_user(user_id))

    @staticmethod
    def delete_run(run_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("DELETE", f"/v1/runs/{run_id}", AcceptedResponse, params=_user(user_id))

    @staticmethod
    def add_step(run_id: str, req: StepRequest) -> Call[AcceptedResponse]:
        return Call("POST", f"/v1/runs/{run_id}/steps", AcceptedResponse, body=req)

    @staticmethod
    def add_tool_call(run_id: str, seq: int, req: ToolCallRequest) -> Call[AcceptedResponse]:
        return Call("POST", f"/v1/runs/{run_id}/steps/{seq}/tool-calls", AcceptedResponse, body=req)

    @staticmethod
    def complete_run(run_id: str, req: CompleteRequest) -> Call[AcceptedResponse]:
        return Call("POST", f"/v1/runs/{run_id}/complete", AcceptedResponse, body=req)

    @staticmethod
    def sessions(*, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
                 cursor: str | None = None) -> Call[SessionPage]:
        return Call("GET", "/v1/conversations", SessionPage, params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def search_messages(req: MessageSearchRequest) -> Call[MessageSearchResponse]:
        return Call("POST", "/v1/conversations/search", MessageSearchResponse, body=req)

    @staticmethod
    def messages(session_id: str, *, user_id: str | None = None, limit: int | None = None,
                 cursor: str | None = None) -> Call[MessagePage]:
        return Call("GET", f"/v1/conversations/{session_id}", MessagePage,
                    params={"user_id": user_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def summary(session_id: str, *, user_id: str | None = None, sentences: int | None = None
                ) -> Call[SessionSummary]:
        return Call("GET", f"/v1/conversations/{session_id}/summary", SessionSummary,
                    params={"user_id": user_id, "sentences": sentences})

    @staticmethod
    def delete_session(session_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("DELETE", f"/v1/conversations/{session_id}", AcceptedResponse, params=_user(user_id))
