"""Every route of the REST API, declared once: method, path, JSON body model, answer model and status.

The FastAPI routers mount their endpoints on these (`service/api/declared.py`), the Python client builds its
requests from them (`service/client/routes.py`) and the MCP operations name the route that wraps the same call
(`service/mcp/operations.py`). `tests/unit/test_routes.py` fails when the app serves a route that is not declared
here the same way, or when the client or the MCP operations write a path of their own.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

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
    RawMemoryRequest,
    UpdateMemoryRequest,
)
from service.schemas.search import GraphPage, GraphSearchRequest, GraphSearchResponse, SearchRequest
from service.tasks.status import TaskResponse

T = TypeVar("T")
Method = Literal["GET", "POST", "PUT", "DELETE"]


@dataclass(frozen=True)
class Route(Generic[T]):
    method: Method
    path: str  # with its path parameters: "/v1/memories/{memory_id}"
    answer: Any  # the answer's model (type[T], or list[...]); None: not JSON (text, a stream)
    body: type[BaseModel] | None = None  # the JSON body's model, if it takes one
    status: int = 200
    read_only: bool = False  # a POST that changes nothing (a search): no Idempotency-Key
    deprecated: bool = False

    @property
    def writes(self) -> bool:
        return self.method != "GET" and not self.read_only

    @property
    def params(self) -> tuple[str, ...]:
        """The path's parameters, in order."""
        return tuple(name for _, name, _, _ in string.Formatter().parse(self.path) if name)

    def url(self, **params: object) -> str:
        """The path with each parameter filled in and escaped."""
        return self.path.format_map({name: quote(str(params[name]), safe="") for name in self.params})


def _r(method: Method, path: str, answer: type[T] | None, body: type[BaseModel] | None = None, status: int = 200,
       **flags: bool) -> Route[T]:
    return Route(method, path, answer, body, status, **flags)


# --- memories ---------------------------------------------------------------------------------------------------
ADD_CONVERSATION = _r("POST", "/v1/memories", AcceptedResponse, ConversationRequest, 202)
ADD_RAW = _r("POST", "/v1/memories/raw", AcceptedResponse, RawMemoryRequest, 202)
ADD_RAW_BATCH = _r("POST", "/v1/memories/raw/batch", AcceptedResponse, RawBatchRequest, 202)
MEMORY_TASK = _r("GET", "/v1/memories/status/{task_id}", TaskResponse)
LIST_MEMORIES = _r("GET", "/v1/memories", MemoryPage)
DELETE_MANY = _r("POST", "/v1/memories/delete", AcceptedResponse, BulkDeleteRequest, 202)
GET_MEMORY = _r("GET", "/v1/memories/{memory_id}", MemoryRecord)
UPDATE_MEMORY = _r("PUT", "/v1/memories/{memory_id}", AcceptedResponse, UpdateMemoryRequest, 202)
DELETE_MEMORY = _r("DELETE", "/v1/memories/{memory_id}", AcceptedResponse, status=202)
TASK = _r("GET", "/v1/tasks/{task_id}", TaskResponse)

# --- reads --------------------------------------------------------------------------------------------------------
SEARCH = _r("POST", "/v1/search", ChatTurn, SearchRequest, read_only=True)
GLOBAL_CONTEXT = _r("GET", "/v1/context/global", ContextWithLessons)
PROJECT_CONTEXT = _r("GET", "/v1/context/{project_id}", ContextWithLessons)
CATEGORIES: Route[list[CategoryOut]] = Route("GET", "/v1/categories", list[CategoryOut])
HEALTH = _r("GET", "/health", HealthResponse)
METRICS: Route[str] = _r("GET", "/metrics", None)  # Prometheus text

# --- graph --------------------------------------------------------------------------------------------------------
GRAPH_SEARCH = _r("POST", "/v1/graph/search", GraphSearchResponse, GraphSearchRequest, read_only=True)
GRAPH_NODES = _r("GET", "/v1/graph/nodes", GraphPage)
GRAPH_EDGES = _r("GET", "/v1/graph/edges", GraphPage)
GRAPH_EPISODES = _r("GET", "/v1/graph/episodes", GraphPage)
GRAPH_STATS = _r("GET", "/v1/graph/stats", GraphStats)
DUPLICATES = _r("GET", "/v1/graph/duplicates", DuplicatePage)
REVIEW = _r("POST", "/v1/graph/duplicates/review", EntityChange, ReviewRequest)
MERGE = _r("POST", "/v1/graph/entities/merge", EntityChange, MergeRequest)
UNMERGE = _r("POST", "/v1/graph/entities/{entity_id}/unmerge", EntityChange, UnmergeRequest)
ADD_ENTITY = _r("POST", "/v1/graph/entities", AcceptedResponse, EntityWrite, 202)
ADD_RELATION = _r("POST", "/v1/graph/relations", AcceptedResponse, RelationWrite, 202)
ADD_FACT = _r("POST", "/v1/graph/facts", AcceptedResponse, FactWrite, 202)
FACTS = _r("GET", "/v1/graph/facts", EntityFactsPage)
ENTITY_FACTS = _r("GET", "/v1/graph/entities/{entity_id}/facts", EntityFactsPage)
QUERY_GRAPH = _r("POST", "/v1/graph/query", FactPage, GraphQuery, read_only=True)
COMMUNITIES = _r("GET", "/v1/graph/communities", CommunityPage)
REBUILD_COMMUNITIES = _r("POST", "/v1/graph/communities/rebuild", AcceptedResponse, CommunityRebuild, 202)
TRACES = _r("GET", "/v1/traces", TracePage)
TRACE = _r("GET", "/v1/traces/{trace_id}", TraceOut)

# --- export, import, maintenance ----------------------------------------------------------------------------------
EXPORT: Route[str] = _r("GET", "/v1/export", None)  # NDJSON
IMPORT = _r("POST", "/v1/import", AcceptedResponse, status=202)  # the body is an export file, not JSON
DEDUP = _r("POST", "/v1/maintenance/dedup", DedupAccepted, DedupRequest, 202)
RECONCILE = _r("POST", "/v1/maintenance/reconcile", ReconcileAccepted, ReconcileRequest, 202)
REEMBED = _r("POST", "/v1/maintenance/reembed", AcceptedResponse, ReembedRequest, 202)
OPTIMIZE = _r("POST", "/v1/maintenance/optimize", AcceptedResponse, status=202)
MAINTENANCE_RUNS = _r("GET", "/v1/maintenance/runs", MaintenanceRunPage)
MAINTENANCE_RUN = _r("GET", "/v1/maintenance/runs/{run_id}", DedupRunReport)

# --- task traces (runs) -------------------------------------------------------------------------------------------
START_RUN = _r("POST", "/v1/runs", RunAccepted, RunRequest, 202)
LIST_RUNS = _r("GET", "/v1/runs", RunPage)
SEARCH_RUNS = _r("POST", "/v1/runs/search", RunSearchResponse, RunSearchRequest, read_only=True)
RUN_STATS = _r("GET", "/v1/runs/stats", RunStats)
GET_RUN = _r("GET", "/v1/runs/{run_id}", RunOut)
DELETE_RUN = _r("DELETE", "/v1/runs/{run_id}", AcceptedResponse, status=202)
ADD_STEP = _r("POST", "/v1/runs/{run_id}/steps", AcceptedResponse, StepRequest, 202)
ADD_TOOL_CALL = _r("POST", "/v1/runs/{run_id}/steps/{seq}/tool-calls", AcceptedResponse, ToolCallRequest, 202)
COMPLETE_RUN = _r("POST", "/v1/runs/{run_id}/complete", AcceptedResponse, CompleteRequest, 202)

# --- conversations ------------------------------------------------------------------------------------------------
SESSIONS = _r("GET", "/v1/conversations", SessionPage)
SEARCH_MESSAGES = _r("POST", "/v1/conversations/search", MessageSearchResponse, MessageSearchRequest,
                     read_only=True)
MESSAGES = _r("GET", "/v1/conversations/{session_id}", MessagePage)
SUMMARY = _r("GET", "/v1/conversations/{session_id}/summary", SessionSummary)
DELETE_SESSION = _r("DELETE", "/v1/conversations/{session_id}", AcceptedResponse, status=202)

# --- the first API's paths (deprecated) ---------------------------------------------------------------------------
LEGACY_ADD = _r("POST", "/memories/async", AcceptedResponse, ConversationRequest, deprecated=True)
LEGACY_TASK = _r("GET", "/memories/status/{task_id}", TaskResponse, deprecated=True)

ROUTES: tuple[Route[Any], ...] = tuple(v for v in globals().values() if isinstance(v, Route))
