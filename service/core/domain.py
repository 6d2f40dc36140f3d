"""Domain: the 13 categories, scope rules, content normalisation, ids, the stored Memory and a conversation
Message. The API's request and response models are in service/schemas/."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from service.core.errors import DomainError
from service.core.sensitivity import Sensitivity

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$"
MAX_METADATA_KEYS = 32
# Namespace for deterministic ids (memory ids from task ids, task ids from requests).
ID_NAMESPACE = uuid.UUID("6f2a3c1e-9d54-4c6b-8f0e-2b7d6c5a4e31")


class Scope(StrEnum):
    GLOBAL = "global"
    PROJECT = "project"


class ListOrder(StrEnum):
    """The order of a memory listing: newest first by created_at (the default), oldest first, or by id (an id
    cursor can be made from an id prefix: the CLI's prefix lookup). Equal created_at go by id."""

    NEWEST = "newest"
    OLDEST = "oldest"
    ID = "id"


# A created_at order's cursor starts with its order's letter; an id cursor is a UUID (hex digits), which never does.
ORDER_MARKS = {ListOrder.NEWEST: "n", ListOrder.OLDEST: "o"}


def listing_order(order: ListOrder | None, cursor: str | None) -> ListOrder:
    """The order a listing page is read in: the one asked for; else the order of the cursor (each page's
    `next_cursor` carries the order that made it, so a walk begun by id, before newest first was the default,
    goes on by id); else newest first."""
    if order is not None:
        return order
    if cursor:
        return next((o for o, mark in ORDER_MARKS.items() if cursor.startswith(mark)), ListOrder.ID)
    return ListOrder.NEWEST


class TaskStatus(StrEnum):
    QUEUED = "queued"
    PROCESSING = "processing"
    RETRYING = "retrying"  # a dependency was slow or away: it runs again at `retry.next_at` (never an end)
    COMPLETED = "completed"
    FAILED = "failed"


class Progress(BaseModel):
    """How far a long task (import, dedup, reconcile) is."""

    done: int
    total: int


@dataclass(frozen=True)
class CategoryInfo:
    name: str
    group: str
    default_scope: Literal["global", "project", "flexible"]
    description: str


CATEGORIES: dict[str, CategoryInfo] = {
    c.name: c
    for c in [
        CategoryInfo("preference", "semantic", "global", "Likes, dislikes and style choices"),
        CategoryInfo("personal_fact", "semantic", "global", "Facts about the person"),
        CategoryInfo("technical_skill", "semantic", "global", "What the person knows how to do"),
        CategoryInfo("domain_knowledge", "semantic", "global", "Knowledge about a field or domain"),
        CategoryInfo("tech_stack", "project", "project", "Languages, frameworks, services a project uses"),
        CategoryInfo("convention", "project", "project", "Project rules: style, naming, layout"),
        CategoryInfo("architecture", "project", "project", "How a project is structured and why"),
        CategoryInfo("dependency", "project", "project", "Libraries, versions and constraints"),
        CategoryInfo("decision", "episodic", "flexible", "A choice that was made, with its reason"),
        CategoryInfo("interaction", "episodic", "flexible", "Something that happened in a session"),
        CategoryInfo("workflow", "procedural", "flexible", "How the person usually works"),
        CategoryInfo("procedure", "procedural", "flexible", "Step-by-step instructions"),
        CategoryInfo("task_context", "working", "flexible", "What is being worked on right now"),
    ]
}


def check_category(name: str) -> CategoryInfo:
    info = CATEGORIES.get(name)
    if info is None:
        # The seed's wording (clients match on it), then the valid names.
        raise DomainError(f"Invalid category '{name}'. Valid categories: {', '.join(CATEGORIES)}")
    return info


def resolve_scope(category: str, scope: Scope | None, project_id: str | None) -> Scope:
    """The scope rule (docs/api.md, "Categories and scopes"): explicit scope wins, else the category default;
    flexible follows project_id."""
    info = check_category(category)
    if scope is None:
        if info.default_scope == "global":
            scope = Scope.GLOBAL
        elif info.default_scope == "project":
            scope = Scope.PROJECT
        else:
            scope = Scope.PROJECT if project_id else Scope.GLOBAL
    if scope is Scope.PROJECT and not project_id:
        raise DomainError(
            f"scope 'project' needs a project_id (category '{category}' defaults to project scope); "
            "pass project_id or scope 'global'"
        )
    return scope


_WS = re.compile(r"\s+")


def normalise(content: str) -> str:
    return _WS.sub(" ", content).strip().casefold()


def content_hash(content: str) -> str:
    return hashlib.md5(normalise(content).encode("utf-8")).hexdigest()


def utc(moment: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken as UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso(moment: datetime) -> str:
    """The stored form of a time: UTC, ISO 8601 (as acceptance times are written)."""
    return utc(moment).isoformat()


def now_iso() -> str:
    """Now, in the stored form of a time."""
    return datetime.now(UTC).isoformat()


def memory_id_for(task_id: str, index: int) -> str:
    """Deterministic per job: a replayed job upserts the same points and nodes."""
    return str(uuid.uuid5(ID_NAMESPACE, f"{task_id}:{index}"))


# --------------------------------------------------------------------------------------------
# Stored record
# --------------------------------------------------------------------------------------------


class Memory(BaseModel):
    id: str
    user_id: str
    content: str
    category: str
    scope: Scope
    project_id: str | None = None
    agent_id: str | None = None
    hash: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str
    task_id: str | None = None
    # When the worker wrote it to the stores (created_at/updated_at are acceptance times): the dedup
    # sweep leaves alone what was written after it started, whenever it was accepted.
    stored_at: str | None = None
    # When what it says happened or was said (a message's timestamp, a raw write's occurred_at, else the
    # acceptance time); created_at stays the acceptance time. Search's after/before and time phrases use it.
    occurred_at: str | None = None
    # The conversation messages it came from: their ids, or their indexes (as strings) without ids.
    source_message_ids: list[str] = Field(default_factory=list)
    # Where it sits in the conversation write it came from (docs/retrieval.md, "Neighbouring turns"): that write's
    # id (its task id; an update changes `task_id`, not this) and the 0-based positions of its first and last source
    # message in the write's messages; a raw write that names its thread and position: `thread:<id>` and that
    # position twice. None for other raw writes and memories without sources: their order is not known.
    source_write: str | None = None
    source_first: int | None = None
    source_last: int | None = None
    # Preferences with a scope and a history (service/memory/preferences.py): what the
    # preference is about (`kind`, e.g. "budget") and the entity names it applies to; a newer preference of
    # the same kind, scope and applies_to sets `superseded_by`/`superseded_at` here (kept, hidden by default).
    kind: str | None = None
    applies_to: list[str] = Field(default_factory=list)
    superseded_by: str | None = None
    superseded_at: str | None = None
    # Its tier (service/core/sensitivity.py): reads under a lower ceiling never return it.
    sensitivity: Sensitivity = Sensitivity.INTERNAL



Role = Literal["user", "assistant", "system", "tool"]
MAX_MESSAGES = 500
MAX_BATCH_MEMORIES = 100  # memories per POST /v1/memories/raw/batch


class Message(BaseModel):
    id: str | None = Field(default=None, min_length=1, max_length=128)
    role: Role
    content: str = Field(min_length=1, max_length=20_000)
    timestamp: str | None = Field(default=None, max_length=64)


class MemoryOut(BaseModel):
    """A stored memory as a write's task result lists it (and the schemas re-export it)."""

    id: str
    content: str
    category: str
    scope: Scope
    project_id: str | None
    created_at: str
    occurred_at: str | None = None
    source_message_ids: list[str] = Field(default_factory=list)
    sensitivity: Sensitivity = Sensitivity.INTERNAL

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return cls(
            sensitivity=m.sensitivity,
            id=m.id,
            content=m.content,
            category=m.category,
            scope=m.scope,
            project_id=m.project_id,
            created_at=m.created_at,
            occurred_at=m.occurred_at,
            source_message_ids=list(m.source_message_ids),
        )
