"""The API side of conversations: the session a conversation write names, and a session's delete (404 for a session
the user does not have, else a ConversationDeleteJob)."""

from __future__ import annotations

import re
from typing import Any

from service.conversations.jobs import ConversationDeleteJob
from service.conversations.service import known_session
from service.core.domain import ID_PATTERN
from service.schemas.memories import AcceptedResponse
from service.stores.tiers import ConversationStore
from service.tasks.queue import TaskQueue


def session_of(session_id: str | None, metadata: dict[str, Any]) -> str | None:
    """The session a conversation write names: `session_id`, else `metadata.session_id` (the hooks' field) when
    it is an id (a session must be addressable as /v1/conversations/{session_id})."""
    if session_id:
        return session_id
    named = metadata.get("session_id")
    return named if isinstance(named, str) and re.fullmatch(ID_PATTERN, named) else None


class ConversationIntake:
    def __init__(self, tasks: TaskQueue, graph: ConversationStore) -> None:
        self.tasks = tasks
        self.graph = graph  # the session a delete names

    async def submit_delete(self, session_id: str, user_id: str) -> AcceptedResponse:
        await known_session(self.graph, user_id, session_id)
        job = ConversationDeleteJob(user_id=user_id, session_id=session_id)
        task_id = await self.tasks.enqueue(job, job.model_dump(mode="json", exclude={"accepted_at"}))
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/tasks/{task_id}")
