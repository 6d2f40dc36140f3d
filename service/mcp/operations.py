"""What the MCP tools ask of the memory service: each operation declared once, with the call the API process makes
(`Operation.local`, on the parts `Local` holds) and the REST route that wraps the same call (declared in
service/routes.py). A `MemoryBackend` runs an operation one way or the other (service/mcp/backend.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, Field

from service import routes
from service.core.domain import ListOrder
from service.routes import Route
from service.runs.schemas import (
    CompleteRequest,
    RunAccepted,
    RunSearchResponse,
    StepRequest,
)
from service.schemas.curation import DuplicatePage, EntityChange
from service.schemas.graph_api import EntityFactsPage, FactPage
from service.schemas.memories import AcceptedResponse, ContextResponse, MemoryPage, UpdateMemoryRequest
from service.schemas.search import GraphSearchResponse, SearchResponse
from service.tasks.status import TaskResponse

if TYPE_CHECKING:
    from service.core.auth import Caller
    from service.graph_api.intake import GraphIntake
    from service.graph_api.reads import GraphFacts
    from service.memory.curation import Curation
    from service.memory.graph_reads import GraphReads
    from service.memory.intake import Intake
    from service.memory.reads import MemoryReads
    from service.memory.search import MemorySearch
    from service.runs.intake import RunIntake
    from service.runs.service import RunService

Req = TypeVar("Req", bound=BaseModel)
Resp = TypeVar("Resp", bound=BaseModel)


class TaskQuery(BaseModel):
    task_id: str


class ContextQuery(BaseModel):
    user_id: str
    project_id: str | None = Field(default=None, exclude=True)  # in the path
    max_tokens: int | None = None
    query: str | None = None


class MemoryListQuery(BaseModel):
    user_id: str
    scope: str | None = None
    category: str | None = None
    project_id: str | None = None
    agent_id: str | None = None
    limit: int = 50
    cursor: str | None = None
    include_superseded: bool = False
    order: ListOrder | None = None


class UpdateQuery(BaseModel):
    memory_id: str
    content: str
    category: str | None = None
    user_id: str | None = None


class DuplicateQuery(BaseModel):
    user_id: str
    project_id: str | None = None
    limit: int = 20
    cursor: str | None = None


class RunStepQuery(StepRequest):
    run_id: str = Field(exclude=True)  # in the path


class RunCompleteQuery(CompleteRequest):
    run_id: str = Field(exclude=True)  # in the path


@dataclass(frozen=True)
class Local:
    """What an operation runs on in the API process."""

    memories: MemoryReads
    search: MemorySearch
    curation: Curation
    graph_reads: GraphReads
    intake: Intake
    caller: Caller
    runs: RunService
    run_intake: RunIntake
    graph_intake: GraphIntake
    graph_facts: GraphFacts


@dataclass(frozen=True)
class Operation(Generic[Req, Resp]):
    response: type[Resp]  # the answer as the tool reads it: the route's answer model or a base of it
    local: Callable[[Local, Req], Awaitable[Resp]]  # in the API process, under the caller's tenant rules
    rest: tuple[Route[Any], ...]  # its REST route (service/routes.py): the first whose path parameters `req` has

    def route(self, req: Req) -> tuple[Route[Any], str, dict[str, Any]]:
        """The REST route of `req`, its path, and the fields the path does not carry (GET sends them as query
        parameters, the others as the JSON body)."""
        fields = req.model_dump(mode="json", exclude_none=True)
        for route in self.rest:
            named = {name: getattr(req, name, None) for name in route.params}
            if all(value is not None for value in named.values()):
                return route, route.url(**named), {k: v for k, v in fields.items() if k not in named}
        raise ValueError(f"{type(req).__name__} lacks the path parameters of {[r.path for r in self.rest]}")


def for_user(
    method: Callable[[Local], Callable[[Req, str], Awaitable[Resp]]],
) -> Callable[[Local, Req], Awaitable[Resp]]:
    """`method(request, user)` for the user the request names, as the caller may act for."""
    return lambda on, req: method(on)(req, on.caller.user(getattr(req, "user_id", None)))


SEARCH = Operation(SearchResponse, for_user(lambda on: on.search.search), (routes.SEARCH,))
GRAPH_SEARCH = Operation(GraphSearchResponse, for_user(lambda on: on.graph_reads.graph_search), (routes.GRAPH_SEARCH,))
SUBMIT_RAW = Operation(AcceptedResponse, for_user(lambda on: on.intake.submit_raw), (routes.ADD_RAW,))
SUBMIT_RAW_BATCH = Operation(AcceptedResponse, for_user(lambda on: on.intake.submit_raw_batch),
                             (routes.ADD_RAW_BATCH,))
SUBMIT_CONVERSATION = Operation(AcceptedResponse, for_user(lambda on: on.intake.submit_conversation),
                                (routes.ADD_CONVERSATION,))
SUBMIT_BULK_DELETE = Operation(AcceptedResponse, for_user(lambda on: on.intake.submit_bulk_delete),
                               (routes.DELETE_MANY,))
REVIEW_DUPLICATE = Operation(EntityChange, for_user(lambda on: on.curation.review_duplicate), (routes.REVIEW,))
MERGE_ENTITIES = Operation(EntityChange, for_user(lambda on: on.curation.merge_entities), (routes.MERGE,))
SUBMIT_UPDATE = Operation[UpdateQuery, AcceptedResponse](
    AcceptedResponse, lambda on, r: on.intake.submit_update(
        r.memory_id, UpdateMemoryRequest(content=r.content, category=r.category, user_id=r.user_id),
        on.caller.user_filter(r.user_id)),
    (routes.UPDATE_MEMORY,))
TASK_STATUS = Operation[TaskQuery, TaskResponse](
    TaskResponse, lambda on, r: on.memories.task_status(r.task_id, on.caller.user_filter(None)),
    (routes.TASK,))
CONTEXT = Operation[ContextQuery, ContextResponse](
    ContextResponse, lambda on, r: on.search.context(on.caller.user(r.user_id), r.project_id, max_tokens=r.max_tokens,
                                                     query=r.query), (routes.PROJECT_CONTEXT, routes.GLOBAL_CONTEXT))
LIST_MEMORIES = Operation[MemoryListQuery, MemoryPage](
    MemoryPage, lambda on, r: on.memories.list_memories(
        on.caller.user(r.user_id), scope=r.scope, category=r.category, project_id=r.project_id, agent_id=r.agent_id,
        limit=r.limit, cursor=r.cursor, include_superseded=r.include_superseded, order=r.order),
    (routes.LIST_MEMORIES,))
LIST_DUPLICATES = Operation[DuplicateQuery, DuplicatePage](
    DuplicatePage, lambda on, r: on.curation.list_duplicates(on.caller.user(r.user_id), r.project_id, r.limit,
                                                             r.cursor),
    (routes.DUPLICATES,))


START_RUN = Operation(RunAccepted, for_user(lambda on: on.run_intake.submit_run), (routes.START_RUN,))
RECORD_STEP = Operation[RunStepQuery, AcceptedResponse](
    AcceptedResponse, lambda on, r: on.run_intake.submit_step(
        r.run_id, StepRequest.model_validate(r.model_dump()), on.caller.user(r.user_id)),
    (routes.ADD_STEP,))
COMPLETE_RUN = Operation[RunCompleteQuery, AcceptedResponse](
    AcceptedResponse, lambda on, r: on.run_intake.submit_complete(
        r.run_id, CompleteRequest.model_validate(r.model_dump()), on.caller.user(r.user_id)),
    (routes.COMPLETE_RUN,))
SEARCH_RUNS = Operation(RunSearchResponse, for_user(lambda on: on.runs.search), (routes.SEARCH_RUNS,))
# ---- the graph as an API (service/graph_api/, docs/graph.md) ----------------------------------------------------


class FactsQuery(BaseModel):
    user_id: str
    name: str
    project_id: str | None = None
    include_history: bool = True
    limit: int = 50


ADD_ENTITY = Operation(AcceptedResponse, for_user(lambda on: on.graph_intake.submit_entity), (routes.ADD_ENTITY,))
ADD_RELATION = Operation(AcceptedResponse, for_user(lambda on: on.graph_intake.submit_relation), (routes.ADD_RELATION,))
ADD_FACT = Operation(AcceptedResponse, for_user(lambda on: on.graph_intake.submit_relation), (routes.ADD_FACT,))
FACTS_ABOUT = Operation[FactsQuery, EntityFactsPage](
    EntityFactsPage, lambda on, r: on.graph_facts.entity_facts(
        on.caller.user(r.user_id), entity_id=None, name=r.name, project_id=r.project_id,
        include_history=r.include_history, limit=r.limit, cursor=None),
    (routes.FACTS,))
QUERY_GRAPH = Operation(FactPage, for_user(lambda on: on.graph_facts.query), (routes.QUERY_GRAPH,))


class MemoryBackend(Protocol):
    async def call(self, op: Operation[Req, Resp], req: Req) -> Resp: ...
