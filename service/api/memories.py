"""Memory writes (202 + task id) and task status."""

from __future__ import annotations

from fastapi import APIRouter, Path

from service.api.deps import ServiceDep
from service.domain import AcceptedResponse, ConversationRequest, RawMemoryRequest, TaskResponse

router = APIRouter(prefix="/v1/memories", tags=["memories"])


@router.post("", status_code=202, response_model=AcceptedResponse)
async def create_memories(req: ConversationRequest, service: ServiceDep) -> AcceptedResponse:
    """Extract categorised facts from a conversation (Gemini, or the offline extractor). 202; poll."""
    return await service.submit_conversation(req)


@router.post("/raw", status_code=202, response_model=AcceptedResponse)
async def create_raw_memory(req: RawMemoryRequest, service: ServiceDep) -> AcceptedResponse:
    """Store one pre-categorised fact (no extraction). Answers 202; poll `poll_url`."""
    return await service.submit_raw(req)


@router.get("/status/{task_id}", response_model=TaskResponse)
async def task_status(
    service: ServiceDep, task_id: str = Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
) -> TaskResponse:
    return await service.tasks.status(task_id)
