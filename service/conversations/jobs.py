"""The job kind of the conversations tier (registered in service/registry.py): a session's delete."""

from __future__ import annotations

from typing import Literal

from service.tasks.jobs import JobModel


class ConversationDeleteJob(JobModel):
    kind: Literal["conversation_delete"] = "conversation_delete"
    user_id: str
    session_id: str
