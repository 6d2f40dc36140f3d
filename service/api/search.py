"""Synchronous reads: search."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import ServiceDep
from service.api.security import CallerDep
from service.schemas import SearchRequest, SearchResponse

router = APIRouter(prefix="/v1", tags=["search"])


@router.post("/search", response_model=SearchResponse)
async def search(req: SearchRequest, service: ServiceDep, caller: CallerDep) -> SearchResponse:
    return await service.search(req, caller.user(req.user_id))
