"""Conversations: the sessions of a user, a session's messages in order, an offline summary, delete.
Messages are written by `POST /v1/memories` (with `session_id`, else one session per write)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from service import routes
from service.api.declared import on
from service.api.deps import ConversationIntakeDep, ConversationsDep, DepsDep
from service.api.errors import responses
from service.api.idempotency import IdempotencyKey, fingerprint, once
from service.api.params import PAGE, IdQuery, OptionalUserQuery, PageLimit, PairCursor
from service.api.security import CallerDep
from service.core.domain import ID_PATTERN
from service.schemas.conversations import (
    MessagePage,
    MessageSearchRequest,
    MessageSearchResponse,
    SessionPage,
    SessionSummary,
)
from service.schemas.memories import AcceptedResponse

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


SessionId = Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN)]


@on(router, routes.SESSIONS)
async def list_sessions(conversations: ConversationsDep, caller: CallerDep, user_id: OptionalUserQuery = None,
                        project_id: IdQuery = None, limit: PageLimit = PAGE, cursor: PairCursor = None) -> SessionPage:
    """The user's sessions, most recently written first, with message counts and times."""
    return await conversations.list_sessions(caller.user(user_id), project_id, limit, cursor)


@on(router, routes.SEARCH_MESSAGES)
async def search_messages(req: MessageSearchRequest, conversations: ConversationsDep,
                          caller: CallerDep) -> MessageSearchResponse:
    """Messages by their words (full text), the current `session_id`'s first."""
    return await conversations.search(req, caller.user(req.user_id))


@on(router, routes.MESSAGES, responses=responses(404))
async def session_messages(session_id: SessionId, conversations: ConversationsDep, caller: CallerDep,
                           user_id: OptionalUserQuery = None, limit: PageLimit = PAGE,
                           cursor: PairCursor = None) -> MessagePage:
    """The session's messages in order (the writes' order, then each write's), a page at a time."""
    return await conversations.messages(caller.user(user_id), session_id, limit, cursor)


@on(router, routes.SUMMARY, responses=responses(404))
async def session_summary(session_id: SessionId, conversations: ConversationsDep, caller: CallerDep,
                          user_id: OptionalUserQuery = None,
                          sentences: Annotated[int, Query(ge=1, le=20)] = 5) -> SessionSummary:
    """An extractive summary computed offline: the sentences carrying the session's most frequent content
    words, in order."""
    return await conversations.summary(caller.user(user_id), session_id, sentences)


@on(router, routes.DELETE_SESSION, responses=responses(404))
async def delete_session(session_id: SessionId, conversations: ConversationIntakeDep, deps: DepsDep, caller: CallerDep,
                         user_id: OptionalUserQuery = None, idempotency_key: IdempotencyKey = None
                         ) -> AcceptedResponse:
    """Erase the session's messages (the memories extracted from them stay: delete those through
    /v1/memories)."""
    user = caller.user(user_id)
    fp = fingerprint("DELETE", f"/v1/conversations/{session_id}", {"user_id": user})
    return await once(deps.intake, caller, user, idempotency_key, fp,
                      lambda: conversations.submit_delete(session_id, user))
