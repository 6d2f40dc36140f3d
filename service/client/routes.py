"""Every route of the API as a `Call` (`Routes`): the one definition both clients send."""

from __future__ import annotations

from typing import Any

from service import routes
from service.client.call import Call
from service.runs.schemas import (
    ChatTurn,
    CompleteRequest,
    ContextWithLessons,
    RunAccepted,
    RunOut,
    RunPage,
    RunRequest,
    RunSearchRequest,
    RunSearchResponse,
    RunStats,
    StepRequest,
    ToolCallRequest,
)
from service.schemas.conversations import (
    MessagePage,
    MessageSearchRequest,
    MessageSearchResponse,
    SessionPage,
    SessionSummary,
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

GRAPH_KINDS = {"nodes": routes.GRAPH_NODES, "edges": routes.GRAPH_EDGES, "episodes": routes.GRAPH_EPISODES}


def _user(user_id: str | None) -> dict[str, Any]:
    return {"user_id": user_id}


def _context(project_id: str | None, **how: Any) -> Call[ContextWithLessons]:
    if project_id:
        return Call.to(routes.PROJECT_CONTEXT, project_id=project_id, **how)
    return Call.to(routes.GLOBAL_CONTEXT, **how)


class Routes:
    """Every route of the API as a `Call` (the one place paths, parameters and answer models are written)."""

    # --- memories -------------------------------------------------------------------------------------------
    @staticmethod
    def add(content: str, *, category: str, user_id: str | None = None, **fields: Any) -> Call[AcceptedResponse]:
        body = RawMemoryRequest(content=content, category=category, user_id=user_id, **fields)
        return Call.to(routes.ADD_RAW, body=body)

    @staticmethod
    def add_batch(memories: list[RawMemoryItem | dict[str, Any]], *, user_id: str | None = None
                  ) -> Call[AcceptedResponse]:
        items = [m if isinstance(m, RawMemoryItem) else RawMemoryItem.model_validate(m) for m in memories]
        return Call.to(routes.ADD_RAW_BATCH, body=RawBatchRequest(memories=items, user_id=user_id))

    @staticmethod
    def add_conversation(messages: list[dict[str, Any]], *, user_id: str | None = None, **fields: Any
                         ) -> Call[AcceptedResponse]:
        body = ConversationRequest.model_validate({"messages": messages, "user_id": user_id, **fields})
        return Call.to(routes.ADD_CONVERSATION, body=body)

    @staticmethod
    def add_legacy(messages: list[dict[str, Any]], *, user_id: str | None = None, **fields: Any
                   ) -> Call[AcceptedResponse]:
        body = ConversationRequest.model_validate({"messages": messages, "user_id": user_id, **fields})
        return Call.to(routes.LEGACY_ADD, body=body)

    @staticmethod
    def task(task_id: str) -> Call[TaskResponse]:
        return Call.to(routes.TASK, task_id=task_id)

    @staticmethod
    def memory_status(task_id: str) -> Call[TaskResponse]:
        return Call.to(routes.MEMORY_TASK, task_id=task_id)

    @staticmethod
    def legacy_status(task_id: str) -> Call[TaskResponse]:
        return Call.to(routes.LEGACY_TASK, task_id=task_id)

    @staticmethod
    def memories(*, user_id: str | None = None, scope: str | None = None, category: str | None = None,
             project_id: str | None = None, agent_id: str | None = None, limit: int | None = None,
             cursor: str | None = None, include_superseded: bool | None = None,
             order: str | None = None) -> Call[MemoryPage]:
        """`order`: newest (the server's default), oldest or id."""
        return Call.to(routes.LIST_MEMORIES, params={
            "user_id": user_id, "scope": scope, "category": category, "project_id": project_id,
            "agent_id": agent_id, "limit": limit, "cursor": cursor, "order": order,
            "include_superseded": None if include_superseded is None else str(include_superseded).lower()})

    @staticmethod
    def get(memory_id: str, *, user_id: str | None = None) -> Call[MemoryRecord]:
        return Call.to(routes.GET_MEMORY, memory_id=memory_id, params=_user(user_id))

    @staticmethod
    def update(memory_id: str, content: str, *, user_id: str | None = None, category: str | None = None
               ) -> Call[AcceptedResponse]:
        body = UpdateMemoryRequest(content=content, user_id=user_id, category=category)
        return Call.to(routes.UPDATE_MEMORY, memory_id=memory_id, body=body)

    @staticmethod
    def delete(memory_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call.to(routes.DELETE_MEMORY, memory_id=memory_id, params=_user(user_id))

    @staticmethod
    def delete_many(*, user_id: str | None = None, **fields: Any) -> Call[AcceptedResponse]:
        body = BulkDeleteRequest.model_validate({"user_id": user_id, **fields})
        return Call.to(routes.DELETE_MANY, body=body)

    # --- reads ---------------------------------------------------------------------------------------------
    @staticmethod
    def search(query: str, *, user_id: str | None = None, **fields: Any) -> Call[ChatTurn]:
        body = SearchRequest.model_validate({"query": query, "user_id": user_id, **fields})
        return Call.to(routes.SEARCH, body=body)

    @staticmethod
    def context(project_id: str | None = None, *, user_id: str | None = None) -> Call[ContextWithLessons]:
        return _context(project_id, params=_user(user_id))

    @staticmethod
    def context_markdown(project_id: str | None = None, *, user_id: str | None = None,
                         max_chars: int | None = None) -> Call[str]:
        params = {"user_id": user_id, "format": "markdown", "max_chars": max_chars}
        return _context(project_id, params=params, text=True)  # type: ignore[return-value]

    @staticmethod
    def categories() -> Call[list[CategoryOut]]:
        return Call.to(routes.CATEGORIES)

    @staticmethod
    def health() -> Call[HealthResponse]:
        return Call.to(routes.HEALTH, accept=(503,))

    @staticmethod
    def metrics() -> Call[str]:
        return Call.to(routes.METRICS)

    # --- graph -----------------------------------------------------------------------------------------------
    @staticmethod
    def graph_search(query: str, *, user_id: str | None = None, **fields: Any) -> Call[GraphSearchResponse]:
        body = GraphSearchRequest.model_validate({"query": query, "user_id": user_id, **fields})
        return Call.to(routes.GRAPH_SEARCH, body=body)

    @staticmethod
    def graph(kind: str, *, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
              cursor: str | None = None, **extra: Any) -> Call[GraphPage]:
        """kind: nodes, edges or episodes."""
        if kind not in GRAPH_KINDS:
            raise ValueError(f"kind: one of {', '.join(GRAPH_KINDS)}, not {kind!r}")
        return Call.to(GRAPH_KINDS[kind], params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor, **extra})

    @staticmethod
    def graph_stats(*, user_id: str | None = None, project_id: str | None = None) -> Call[GraphStats]:
        return Call.to(routes.GRAPH_STATS, params={"user_id": user_id, "project_id": project_id})

    @staticmethod
    def duplicates(*, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
                   cursor: str | None = None) -> Call[DuplicatePage]:
        return Call.to(routes.DUPLICATES, params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def review(source_id: str, target_id: str, confirm: bool, *, user_id: str | None = None) -> Call[EntityChange]:
        body = ReviewRequest(source_id=source_id, target_id=target_id, confirm=confirm, user_id=user_id)
        return Call.to(routes.REVIEW, body=body)

    @staticmethod
    def merge(source_id: str, target_id: str, *, user_id: str | None = None) -> Call[EntityChange]:
        body = MergeRequest(source_id=source_id, target_id=target_id, user_id=user_id)
        return Call.to(routes.MERGE, body=body)

    @staticmethod
    def unmerge(entity_id: str, *, user_id: str | None = None) -> Call[EntityChange]:
        return Call.to(routes.UNMERGE, entity_id=entity_id, body=UnmergeRequest(user_id=user_id))

    # --- the graph as an API (docs/graph.md) ------------------------------------------------------------------
    @staticmethod
    def add_entity(body: EntityWrite) -> Call[AcceptedResponse]:
        return Call.to(routes.ADD_ENTITY, body=body)

    @staticmethod
    def add_relation(body: RelationWrite) -> Call[AcceptedResponse]:
        return Call.to(routes.ADD_RELATION, body=body)

    @staticmethod
    def add_fact(body: FactWrite) -> Call[AcceptedResponse]:
        return Call.to(routes.ADD_FACT, body=body)

    @staticmethod
    def facts(*, name: str | None = None, entity_id: str | None = None, user_id: str | None = None,
              project_id: str | None = None, include_history: bool | None = None, limit: int | None = None,
              cursor: str | None = None) -> Call[EntityFactsPage]:
        return Call.to(routes.FACTS, params={
            "name": name, "entity_id": entity_id, "user_id": user_id, "project_id": project_id,
            "include_history": include_history, "limit": limit, "cursor": cursor})

    @staticmethod
    def entity_facts(entity_id: str, *, user_id: str | None = None, include_history: bool | None = None,
                     limit: int | None = None, cursor: str | None = None) -> Call[EntityFactsPage]:
        return Call.to(routes.ENTITY_FACTS, entity_id=entity_id, params={
            "user_id": user_id, "include_history": include_history, "limit": limit, "cursor": cursor})

    @staticmethod
    def query_graph(body: GraphQuery) -> Call[FactPage]:
        return Call.to(routes.QUERY_GRAPH, body=body)

    @staticmethod
    def communities(*, user_id: str | None = None, limit: int | None = None, cursor: str | None = None
                    ) -> Call[CommunityPage]:
        return Call.to(routes.COMMUNITIES, params={"user_id": user_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def rebuild_communities(*, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call.to(routes.REBUILD_COMMUNITIES, body=CommunityRebuild(user_id=user_id))

    @staticmethod
    def traces(*, user_id: str | None = None, entity_id: str | None = None, limit: int | None = None,
               cursor: str | None = None) -> Call[TracePage]:
        return Call.to(routes.TRACES, params={
            "user_id": user_id, "entity_id": entity_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def trace(trace_id: str, *, user_id: str | None = None) -> Call[TraceOut]:
        return Call.to(routes.TRACE, trace_id=trace_id, params=_user(user_id))

    # --- export, import, maintenance -------------------------------------------------------------------------
    @staticmethod
    def export(*, user_id: str | None = None, project_id: str | None = None, include_vectors: bool = False
               ) -> Call[str]:
        return Call.to(routes.EXPORT, params={
            "user_id": user_id, "project_id": project_id, "include_vectors": include_vectors or None})

    @staticmethod
    def import_file(data: bytes) -> Call[AcceptedResponse]:
        return Call.to(routes.IMPORT, content=data)

    @staticmethod
    def dedup(*, user_id: str | None = None, dry_run: bool = False) -> Call[DedupAccepted]:
        return Call.to(routes.DEDUP, body=DedupRequest(user_id=user_id,
                                                                                       dry_run=dry_run))

    @staticmethod
    def reconcile(*, user_id: str | None = None, dry_run: bool = False) -> Call[ReconcileAccepted]:
        return Call.to(routes.RECONCILE, body=ReconcileRequest(user_id=user_id, dry_run=dry_run))

    @staticmethod
    def reembed(*, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call.to(routes.REEMBED, body=ReembedRequest(user_id=user_id))

    @staticmethod
    def optimize() -> Call[AcceptedResponse]:
        return Call.to(routes.OPTIMIZE)

    @staticmethod
    def maintenance_runs(*, limit: int | None = None, cursor: str | None = None) -> Call[MaintenanceRunPage]:
        return Call.to(routes.MAINTENANCE_RUNS, params={"limit": limit, "cursor": cursor})

    @staticmethod
    def maintenance_run(run_id: str) -> Call[DedupRunReport]:
        return Call.to(routes.MAINTENANCE_RUN, run_id=run_id)

    # --- task traces (runs) and conversations ----------------------------------------------------------------
    @staticmethod
    def start_run(req: RunRequest) -> Call[RunAccepted]:
        return Call.to(routes.START_RUN, body=req)

    @staticmethod
    def runs(*, user_id: str | None = None, session_id: str | None = None, project_id: str | None = None,
             limit: int | None = None, cursor: str | None = None) -> Call[RunPage]:
        return Call.to(routes.LIST_RUNS, params={"user_id": user_id, "session_id": session_id,
                                                         "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def search_runs(req: RunSearchRequest) -> Call[RunSearchResponse]:
        return Call.to(routes.SEARCH_RUNS, body=req)

    @staticmethod
    def run_stats(*, user_id: str | None = None, project_id: str | None = None) -> Call[RunStats]:
        return Call.to(routes.RUN_STATS, params={"user_id": user_id, "project_id": project_id})

    @staticmethod
    def run(run_id: str, *, user_id: str | None = None) -> Call[RunOut]:
        return Call.to(routes.GET_RUN, run_id=run_id, params=_user(user_id))

    @staticmethod
    def delete_run(run_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call.to(routes.DELETE_RUN, run_id=run_id, params=_user(user_id))

    @staticmethod
    def add_step(run_id: str, req: StepRequest) -> Call[AcceptedResponse]:
        return Call.to(routes.ADD_STEP, run_id=run_id, body=req)

    @staticmethod
    def add_tool_call(run_id: str, seq: int, req: ToolCallRequest) -> Call[AcceptedResponse]:
        return Call.to(routes.ADD_TOOL_CALL, run_id=run_id, seq=seq, body=req)

    @staticmethod
    def complete_run(run_id: str, req: CompleteRequest) -> Call[AcceptedResponse]:
        return Call.to(routes.COMPLETE_RUN, run_id=run_id, body=req)

    @staticmethod
    def sessions(*, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
                 cursor: str | None = None) -> Call[SessionPage]:
        return Call.to(routes.SESSIONS, params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def search_messages(req: MessageSearchRequest) -> Call[MessageSearchResponse]:
        return Call.to(routes.SEARCH_MESSAGES, body=req)

    @staticmethod
    def messages(session_id: str, *, user_id: str | None = None, limit: int | None = None,
                 cursor: str | None = None) -> Call[MessagePage]:
        return Call.to(routes.MESSAGES, session_id=session_id,
                       params={"user_id": user_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def summary(session_id: str, *, user_id: str | None = None, sentences: int | None = None
                ) -> Call[SessionSummary]:
        return Call.to(routes.SUMMARY, session_id=session_id, params={"user_id": user_id, "sentences": sentences})

    @staticmethod
    def delete_session(session_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call.to(routes.DELETE_SESSION, session_id=session_id, params=_user(user_id))
