"""Extraction Protocol: a conversation in, typed categorised facts out.

Backends: `service/ai/gemini/` (google-genai, structured output), `service/ai/openai/` (any OpenAI-compatible
server; docs/llm.md), both on the shared prompt and validation of `service/ai/llm/`, and `service/ai/offline/`
(deterministic rules, no network). The worker sees only this Protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field, field_validator

from service.core.domain import CATEGORIES, MAX_MESSAGES, Message, Scope

__all__ = ["ExtractedEntity", "ExtractedFact", "ExtractedRelation", "ExtractionResult", "Extractor", "KnownMemory",
           "Message", "TokenUsage"]


class ExtractedEntity(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    type: str = Field(default="thing", min_length=1, max_length=64)
    # what the conversation says it is ("plumber", "VP of Sales"): tells two things of one name apart
    role: str | None = Field(default=None, max_length=100)


class ExtractedRelation(BaseModel):
    subject: str = Field(min_length=1, max_length=200)
    predicate: str = Field(min_length=1, max_length=64)  # snake_case verb phrase, e.g. "prefers", "uses"
    object: str = Field(min_length=1, max_length=200)
    fact: str = Field(min_length=1, max_length=1000)  # the sentence that states it


class ExtractedFact(BaseModel):
    content: str = Field(min_length=1, max_length=2000)
    category: str
    scope: Scope | None = None
    entities: list[ExtractedEntity] = Field(default_factory=list, max_length=32)
    relations: list[ExtractedRelation] = Field(default_factory=list, max_length=32)
    # When the fact became true, if the conversation says (ISO 8601 date or datetime).
    valid_at: str | None = Field(default=None, max_length=64)
    # Indexes (0-based, into the conversation's messages) of the messages it came from.
    source_messages: list[int] = Field(default_factory=list, max_length=MAX_MESSAGES)
    # The ids of the user's stored memories (shown to the model as `known`) this fact makes out of date: only ids
    # that were shown (service/ai/llm/validation.py `resolve_replaces`).
    replaces: list[str] = Field(default_factory=list, max_length=16)

    @field_validator("category")
    @classmethod
    def _known_category(cls, value: str) -> str:
        if value not in CATEGORIES:
            raise ValueError(f"unknown category '{value}'")
        return value


class TokenUsage(BaseModel):
    prompt_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0

    def add(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            calls=self.calls + other.calls,
        )


class ExtractionResult(BaseModel):
    facts: list[ExtractedFact]
    extractor: str  # "offline" or the model that answered, e.g. "gemini-2.5-flash"
    usage: TokenUsage = Field(default_factory=TokenUsage)
    dropped: int = 0  # items the model returned that failed validation (logged, never stored)


KNOWN_MEMORIES = 8  # at most this many known memories in a prompt
KNOWN_CHARS = 300  # each cut to this many characters: at most about 600 tokens in all


class KnownMemory(BaseModel):
    """A stored memory of the user that a conversation may change, shown to an LLM extractor (its `replaces`)."""

    id: str
    content: str = Field(max_length=KNOWN_CHARS)
    said: str | None = None  # the day it was said


class Extractor(Protocol):
    name: str
    # whether `known` reaches the model (an LLM names what a fact replaces; the offline rules do not read it)
    names_replacements: bool

    async def extract(self, messages: list[Message], project_id: str | None = None,
                      known: Sequence[KnownMemory] = ()) -> ExtractionResult: ...


class LinkFinder(Protocol):
    """The graph side of one stored statement without an LLM: its entities and relations (raw writes,
    updates, and the reconciler's repairs). Injected into the memory service (service/deps.py)."""

    name: str

    def find(
        self, content: str, category: str, project_id: str | None
    ) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]: ...
