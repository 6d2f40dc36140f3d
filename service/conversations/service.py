"""The reads of conversations: a user's sessions, a session's messages in order, its summary (Gemini with a key,
else extractive), message search. The API side of their writes is intake.py, the worker side writes.py."""

from __future__ import annotations

from typing import Any

import structlog

from service.conversations.summary import SessionSummarizer, summarise
from service.core.errors import NotFound, ServiceError
from service.schemas.conversations import (
    MessageHit,
    MessageOut,
    MessagePage,
    MessageSearchRequest,
    MessageSearchResponse,
    SessionOut,
    SessionPage,
    SessionSummary,
    SummarySentence,
)
from service.stores.tiers import ConversationStore

log = structlog.get_logger(__name__)
SUMMARY_MESSAGES = 2000  # the most messages a summary reads (the first ones)


async def known_session(graph: ConversationStore, user_id: str, session_id: str) -> dict[str, Any]:
    """The session, or NotFound (a read's and a delete's 404)."""
    found = await graph.session(user_id, session_id)
    if found is None:
        raise NotFound(f"unknown session id '{session_id}'")
    return found


class ConversationService:
    """The reads of conversations: sessions, a session's messages in order, its summary, message search."""

    def __init__(self, graph: ConversationStore, summarizer: SessionSummarizer | None = None) -> None:
        self.graph = graph
        self.summarizer = summarizer  # Gemini with GOOGLE_API_KEY; else the extractive summary only

    async def list_sessions(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> SessionPage:
        rows, next_cursor = await self.graph.list_sessions(user_id, project_id, limit, cursor)
        return SessionPage(items=[SessionOut(**r) for r in rows], next_cursor=next_cursor)

    async def messages(self, user_id: str, session_id: str, limit: int, cursor: str | None) -> MessagePage:
        await known_session(self.graph, user_id, session_id)
        rows, next_cursor = await self.graph.session_messages(user_id, session_id, limit, cursor)
        return MessagePage(session_id=session_id, next_cursor=next_cursor,
                           items=[MessageOut(**{k: v for k, v in r.items() if k not in ("ord", "position")})
                                  for r in rows])

    async def summary(self, user_id: str, session_id: str, max_sentences: int) -> SessionSummary:
        session = await known_session(self.graph, user_id, session_id)
        rows: list[dict[str, Any]] = []
        cursor: str | None = None
        while len(rows) < SUMMARY_MESSAGES:
            page, cursor = await self.graph.session_messages(user_id, session_id, 500, cursor)
            rows += page
            if cursor is None:
                break
        rows = rows[:SUMMARY_MESSAGES]
        lines = [(str(r["role"]), str(r["content"])) for r in rows]
        fallback: str | None = None
        if self.summarizer is not None and lines:
            try:
                text, model = await self.summarizer.summarise(lines, max_sentences)
            except ServiceError as exc:  # a read: the offline summary, saying why
                log.warning("summary_model_failed", session_id=session_id, error=str(exc))
                fallback = str(exc)[:300] or type(exc).__name__
            else:
                return SessionSummary(session_id=session_id, model=model, summary=text,
                                      method="openai" if self.summarizer.name == "openai" else "gemini",
                                      message_count=int(session.get("message_count") or 0), sentences=[])
        picked = summarise(lines, max_sentences)
        sentences = [SummarySentence(message_id=rows[p.message_index].get("id"),
                                     role=str(rows[p.message_index]["role"]), text=p.text) for p in picked]
        return SessionSummary(session_id=session_id, message_count=int(session.get("message_count") or 0),
                              summary=" ".join(s.text for s in sentences), sentences=sentences,
                              fallback_reason=fallback)

    async def search(self, req: MessageSearchRequest, user_id: str) -> MessageSearchResponse:
        """Full text over the user's messages (Lucene, standard analyzer); the current session's hits first."""
        hits = await self.graph.search_messages(user_id, req.query, req.project_id, max(50, req.limit * 5))
        ranked = sorted(hits, key=lambda h: (h[0].get("session_id") != req.session_id, -h[1]))
        return MessageSearchResponse(results=[MessageHit(score=round(score, 6), **row)
                                              for row, score in ranked[: req.limit]])

