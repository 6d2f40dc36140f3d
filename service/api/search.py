"""Synchronous reads: search."""

from __future__ import annotations

from fastapi import APIRouter

from service import routes
from service.api.declared import on
from service.api.deps import ConversationsDep, EntitySearchDep, RunsDep, SearchDep
from service.api.security import CallerDep
from service.core.sensitivity import lowered
from service.memory.turn import chat_turn
from service.schemas.search import SearchRequest, SearchResponse

router = APIRouter(prefix="/v1", tags=["search"])


@on(router, routes.SEARCH)
async def search(req: SearchRequest, search: SearchDep, runs: RunsDep, conversations: ConversationsDep,
                 entities: EntitySearchDep, caller: CallerDep) -> SearchResponse:
    user = caller.user(req.user_id)
    with lowered(req.max_sensitivity):  # the body's own ceiling, below the key's
        found = await search.search(req, user)
        # include: prior task runs, message hits, entities beside the memories (one chat-turn payload)
        return await chat_turn(found, req, user, runs, conversations, entities)
