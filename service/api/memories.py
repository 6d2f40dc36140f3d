"""Memory writes (202 + task id), task status, listing and single-memory routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service import routes
from service.api.declared import on
from service.api.deps import IntakeDep, MemoriesDep
from service.api.errors import responses
from service.api.idempotency import IdempotencyKey, fingerprint, once
from service.api.params import (
    PAGE,
    Cursor,
    IdQuery,
    MemoryId,
    OptionalUserQuery,
    OrderQuery,
    OwnerQuery,
    PageLimit,
    TaskId,
)
from service.api.security import CallerDep
from service.core.domain import Scope
from service.schemas.memories import (
    AcceptedResponse,
    BulkDeleteRequest,
    ConversationRequest,
    MemoryPage,
    MemoryRecord,
    RawBatchRequest,
    RawMemoryRequest,
    UpdateMemoryRequest,
)
from service.tasks.status import TaskResponse

router = APIRouter(prefix="/v1/memories", tags=["memories"])



@on(router, routes.ADD_CONVERSATION)
async def create_memories(
    req: ConversationRequest, intake: IntakeDep, caller: CallerDep, idempotency_key: IdempotencyKey = None
) -> AcceptedResponse:
    """Extract categorised facts from a conversation (Gemini, or the offline extractor). 202; poll."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/memories", req.model_dump(mode="json"))
    return await once(intake, caller, user, idempotency_key, fp, lambda: intake.submit_conversation(req, user))


@on(router, routes.ADD_RAW)
async def create_raw_memory(
    req: RawMemoryRequest, intake: IntakeDep, caller: CallerDep, idempotency_key: IdempotencyKey = None
) -> AcceptedResponse:
    """Store one pre-categorised fact (no extraction). Answers 202; poll `poll_url`."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/memories/raw", req.model_dump(mode="json"))
    return await once(intake, caller, user, idempotency_key, fp, lambda: intake.submit_raw(req, user))


@on(router, routes.ADD_RAW_BATCH)
async def create_raw_memories(
    req: RawBatchRequest, intake: IntakeDep, caller: CallerDep, idempotency_key: IdempotencyKey = None
) -> AcceptedResponse:
    """Store up to 100 pre-categorised facts of one user as one task: one job, one embedding batch, one graph
    transaction. Each item is checked as `POST /v1/memories/raw` checks one (an error names it: `memories[3]: ...`);
    the task's result lists the memories in the batch's order. Answers 202; poll `poll_url`."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/memories/raw/batch", req.model_dump(mode="json"))
    return await once(intake, caller, user, idempotency_key, fp, lambda: intake.submit_raw_batch(req, user))


@on(router, routes.MEMORY_TASK, responses=responses(404))
async def task_status(
    task_id: TaskId, memories: MemoriesDep, caller: CallerDep,
) -> TaskResponse:
    return await memories.task_status(task_id, caller.user_filter(None))


@on(router, routes.LIST_MEMORIES)
async def list_memories(
    memories: MemoriesDep,
    caller: CallerDep,
    user_id: OptionalUserQuery = None,
    scope: Scope | None = None,
    category: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    project_id: IdQuery = None,
    agent_id: IdQuery = None,
    limit: PageLimit = PAGE,
    cursor: Cursor = None,
    include_superseded: bool = False,
    order: OrderQuery = None,
) -> MemoryPage:
    """A page of the user's memories, newest first (`order`: oldest, id); pass `next_cursor` back as `cursor`.
    Without scope and project_id: everything of the user; with project_id: global + that project.
    Preferences a newer one superseded are left out unless `include_superseded` (their history)."""
    return await memories.list_memories(
        caller.user(user_id), scope=scope, category=category, project_id=project_id, agent_id=agent_id, limit=limit,
        cursor=cursor, include_superseded=include_superseded, order=order,
    )


@on(router, routes.DELETE_MANY)
async def bulk_delete(
    req: BulkDeleteRequest, intake: IntakeDep, caller: CallerDep, idempotency_key: IdempotencyKey = None
) -> AcceptedResponse:
    """Delete by ids or by filter (through the queue, like every write)."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/memories/delete", req.model_dump(mode="json"))
    return await once(intake, caller, user, idempotency_key, fp, lambda: intake.submit_bulk_delete(req, user))


@on(router, routes.GET_MEMORY, responses=responses(404))
async def get_memory(
    memory_id: MemoryId, memories: MemoriesDep, caller: CallerDep, user_id: OwnerQuery = None
) -> MemoryRecord:
    return await memories.get_memory(memory_id, caller.user_filter(user_id))


@on(router, routes.UPDATE_MEMORY, responses=responses(404))
async def update_memory(
    memory_id: MemoryId, req: UpdateMemoryRequest, intake: IntakeDep, caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> AcceptedResponse:
    """New content (and optionally category); re-embedded and re-ingested into the graph."""
    owner = caller.user_filter(req.user_id)
    fp = fingerprint("PUT", f"/v1/memories/{memory_id}", req.model_dump(mode="json"))
    return await once(intake, caller, owner, idempotency_key, fp, lambda: intake.submit_update(memory_id, req, owner))


@on(router, routes.DELETE_MEMORY, responses=responses(404))
async def delete_memory(
    memory_id: MemoryId, intake: IntakeDep, caller: CallerDep, user_id: OwnerQuery = None,
    idempotency_key: IdempotencyKey = None,
) -> AcceptedResponse:
    owner = caller.user_filter(user_id)
    fp = fingerprint("DELETE", f"/v1/memories/{memory_id}", {"user_id": owner})
    return await once(intake, caller, owner, idempotency_key, fp, lambda: intake.submit_delete(memory_id, owner))
