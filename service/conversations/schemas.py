"""Response models of the conversations API (`/v1/conversations`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class SessionOut(BaseModel):
    session_id: str
    project_id: str | None = None
    message_count: int
    created_at: str | None = None  # the first write's acceptance
    updated_at: str | None = None  # the last write's acceptance


class SessionPage(BaseModel):
    status: Literal["ok"] = "ok"
    items: list[SessionOut]
    next_cursor: str | None


class MessageOut(BaseModel):
    id: str | None = None  # the client's id, when it gave one
    role: str
    content: str
    timestamp: str | None = None
    task_id: str | None = None
    memory_ids: list[str] = Field(default_factory=list, description="memories that came from this message")
    created_at: str | None = None


class MessagePage(BaseModel):
    status: Literal["ok"] = "ok"
    session_id: str
    items: list[MessageOut]
    next_cursor: str | None


class SummarySentence(BaseModel):
    message_id: str | None = None
    role: str
    text: str


class SessionSummary(BaseModel):
    status: Literal["ok"] = "ok"
    session_id: str
    method: Literal["extractive"] = "extractive"
    message_count: int
    summary: str
    sentences: list[SummarySentence]
