"""Request and response models of the conversations API (`/v1/conversations`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.core.domain import ID_PATTERN
from service.schemas.memories import OptionalId, TenantId


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


class MessageSearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000)
    user_id: str | None = TenantId
    session_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                                   description="The current session: its hits come first")
    project_id: str | None = OptionalId
    limit: int = Field(default=10, ge=1, le=100)


class MessageHit(MessageOut):
    session_id: str
    score: float


class MessageSearchResponse(BaseModel):
    status: Literal["ok"] = "ok"
    results: list[MessageHit]


class SummarySentence(BaseModel):
    message_id: str | None = None
    role: str
    text: str


class SessionSummary(BaseModel):
    status: Literal["ok"] = "ok"
    session_id: str
    method: Literal["extractive", "gemini", "openai"] = "extractive"
    model: str | None = Field(default=None, description="method gemini or openai (the LLM provider, docs/llm.md): "
                              "the model that wrote the summary")
    message_count: int
    summary: str
    sentences: list[SummarySentence] = Field(description="method extractive: the sentences picked, in order")
    fallback_reason: str | None = Field(default=None, description=(
        "extractive although a model is configured: why the model did not answer"))
