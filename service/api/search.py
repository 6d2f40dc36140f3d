"""Synchronous reads: search."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import ServiceDep
from service.api.runs import RunsDep
from service.api.security import CallerDep
from service.runs.schemas import SearchWithReasoning
from service.schemas import SearchRequest, SearchResponse

router = APIRouter(prefix="/v1", tags=["search"])


@router.post("/search", response_model=SearchWithReasoning)
async def search(req: SearchRequest, service: ServiceDep, runs: RunsDep, caller: CallerDep) -> SearchResponse:
    user = caller.user(req.user_id)
    found = await service.search(req, user)
    if req.include and "traces" in req.include:  # prior task runs beside the memories
        return await runs.reasoning(found, req.query, user, req.project_id)
    return found
