"""The seed's legacy root endpoints, kept so clients written against it work unchanged (deprecated: use
`POST /v1/memories` and `GET /v1/memories/status/{task_id}`)."""

from __future__ import annotations

from fastapi import APIRouter

from service import routes
from service.api.declared import on
from service.api.deps import IntakeDep, MemoriesDep
from service.api.errors import responses
from service.api.idempotency import IdempotencyKey, fingerprint, once
from service.api.params import TaskId
from service.api.security import CallerDep
from service.schemas.memories import AcceptedResponse, ConversationRequest
from service.tasks.status import TaskResponse

router = APIRouter(prefix="/memories", tags=["legacy (deprecated)"])


@on(router, routes.LEGACY_ADD)
async def legacy_conversation(
    req: ConversationRequest, intake: IntakeDep, caller: CallerDep, idempotency_key: IdempotencyKey = None
) -> AcceptedResponse:
    """Deprecated: `POST /v1/memories`. Same body and queue; answers 200 (as the seed did) with a legacy
    `poll_url` under /memories/status/."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/memories", req.model_dump(mode="json"))
    accepted = await once(intake, caller, user, idempotency_key, fp, lambda: intake.submit_conversation(req, user))
    return AcceptedResponse(task_id=accepted.task_id, poll_url=f"/memories/status/{accepted.task_id}")


@on(router, routes.LEGACY_TASK, responses=responses(404))
async def legacy_status(task_id: TaskId, memories: MemoriesDep, caller: CallerDep) -> TaskResponse:
    """Deprecated: `GET /v1/memories/status/{task_id}`."""
    return await memories.task_status(task_id, caller.user_filter(None))
