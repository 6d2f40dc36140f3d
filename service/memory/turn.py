"""One payload for a chat turn (a chat endpoint's payload): `POST /v1/search` with `include` adds, beside the memories,

- `"traces"` → `reasoning`: prior task runs (service/runs/service.py, `RunService.reasoning`);
- `"messages"` → `messages`: hits among the conversation tier's messages (full text), the request's `session_id`
  (the current session) first (service/conversations/service.py);
- `"entities"` → `entities`: the entities the query names, with their score, how many memories mention them and
  the names of the entities their live facts relate them to (`search_entities` of the graph store).

Each part runs beside the others (`asyncio.gather`); without `include` the answer is the plain search's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from service.conversations.service import ConversationService
from service.runs.schemas import ChatTurn, EntityHit, ReasoningHit
from service.runs.service import RunService
from service.schemas.conversations import MessageHit, MessageSearchRequest
from service.schemas.search import SearchRequest, SearchResponse
from service.stores.graph import groups_for
from service.stores.tiers import EntitySearch

TURN_MESSAGES = 5
TURN_ENTITIES = 5


async def chat_turn(found: SearchResponse, req: SearchRequest, user_id: str, runs: RunService,
                    conversations: ConversationService, graph: EntitySearch) -> SearchResponse:
    """The search's answer with the parts `req.include` asks for (the plain answer without `include`)."""
    include = set(req.include or ())
    if not include:
        return found

    async def reasoning() -> list[ReasoningHit] | None:
        if "traces" not in include:
            return None
        return (await runs.reasoning(found, req.query, user_id, req.project_id)).reasoning

    async def messages() -> list[MessageHit] | None:
        if "messages" not in include:
            return None
        ask = MessageSearchRequest(query=req.query, session_id=req.session_id, project_id=req.project_id,
                                   limit=TURN_MESSAGES)
        return (await conversations.search(ask, user_id)).results

    async def entities() -> list[EntityHit] | None:
        if "entities" not in include:
            return None
        rows: list[dict[str, Any]] = await graph.search_entities(
            user_id, groups_for(req.project_id), req.query, TURN_ENTITIES)
        return [EntityHit(**r) for r in rows]

    traces, hits, named = await asyncio.gather(reasoning(), messages(), entities())
    return ChatTurn(**found.model_dump(), reasoning=traces, messages=hits, entities=named)
