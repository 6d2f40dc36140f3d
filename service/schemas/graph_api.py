"""Requests and responses of the graph as an API (docs/graph.md): structured writes, facts about an entity,
structural queries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.core.domain import Scope
from service.core.sensitivity import Sensitivity
from service.schemas.memories import MaxSensitivity, OptionalId, TenantId

Name = Field(min_length=1, max_length=200)


class EntityEnd(BaseModel):
    """One end of a relation or a fact: an entity id (the user's, followed through merges) or a name (resolved
    through the gate like an extracted one: an existing entity by name, alias or a close spelling, else a new
    one of `type`)."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = OptionalId
    name: str | None = Field(default=None, min_length=1, max_length=200)
    type: str = Field(default="thing", min_length=1, max_length=64)

    @model_validator(mode="after")
    def _one(self) -> EntityEnd:
        if (self.id is None) == (self.name is None):
            raise ValueError("give either id or name")
        return self


End = str | EntityEnd  # a plain string is a name


class _Write(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = TenantId
    scope: Scope | None = Field(default=None, description="global (default) or project (with project_id)")
    project_id: str | None = OptionalId
    agent_id: str | None = OptionalId
    sensitivity: Sensitivity | None = Field(
        default=None, description="The tier of the memory that states it: public, internal (default), private or "
                                  "secret. A fact only such memories support is hidden from reads under a lower "
                                  "ceiling.")


class EntityWrite(_Write):
    name: str = Name
    type: str = Field(default="thing", min_length=1, max_length=64,
                      description="one of the entity types of docs/graph.md (a synonym is mapped)")
    aliases: list[str] = Field(default_factory=list, max_length=20)
    description: str | None = Field(default=None, max_length=2000)
    attributes: dict[str, Any] = Field(default_factory=dict, max_length=50)


class RelationWrite(_Write):
    source: End
    target: End
    predicate: str = Field(min_length=1, max_length=100, description="free text; normalised (docs/graph.md)")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    valid_at: datetime | None = None
    fact: str | None = Field(default=None, max_length=2000, description="the sentence; default: the triple")


class FactWrite(_Write):
    subject: End
    predicate: str = Field(min_length=1, max_length=100, description="free text; normalised (docs/graph.md)")
    object: End
    valid_at: datetime | None = None
    fact: str | None = Field(default=None, max_length=2000, description="the sentence; default: the triple")


class EntitySummary(BaseModel):
    id: str
    name: str
    type: str


class EntityInfo(EntitySummary):
    aliases: list[str] = Field(default_factory=list)
    group_id: str
    description: str | None = None
    attributes: dict[str, Any] | None = None


class FactItem(BaseModel):
    id: str
    subject: EntitySummary
    predicate: str
    object: EntitySummary
    fact: str
    valid_at: str | None
    invalid_at: str | None
    expired_at: str | None
    current: bool
    confidence: float | None = None
    memory_ids: list[str]
    group_id: str


class EntityFactsPage(BaseModel):
    entity: EntityInfo
    items: list[FactItem]
    next_cursor: str | None


class GraphQuery(BaseModel):
    """Typed relations: every field given must hold (none given: every current fact)."""

    model_config = ConfigDict(extra="forbid")

    user_id: str | None = TenantId
    max_sensitivity: Sensitivity | None = MaxSensitivity
    project_id: str | None = OptionalId
    subject: str | None = Field(default=None, min_length=1, max_length=200, description="a name (resolved)")
    subject_type: str | None = Field(default=None, min_length=1, max_length=64)
    predicate: str | None = Field(default=None, min_length=1, max_length=100)
    object: str | None = Field(default=None, min_length=1, max_length=200, description="a name (resolved)")
    object_type: str | None = Field(default=None, min_length=1, max_length=64)
    as_of: datetime | None = Field(default=None, description="facts valid at this time (default: current ones)")
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str | None = Field(default=None, max_length=16)


class FactPage(BaseModel):
    items: list[FactItem]
    next_cursor: str | None


class CommunityItem(BaseModel):
    id: str
    size: int
    members: list[EntitySummary] = Field(description="live members, the best connected first")
    predicates: list[str] = Field(description="the most frequent predicates inside the community")
    summary: str
    summary_source: str = Field(description="offline: built from its top entities and predicates")
    updated_at: str | None


class CommunityPage(BaseModel):
    items: list[CommunityItem]
    next_cursor: str | None


class CommunityRebuild(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = TenantId


def entity_summary(e: dict[str, Any]) -> EntitySummary:
    """An entity row of the store as the API shows it."""
    return EntitySummary(id=str(e["id"]), name=str(e.get("name") or ""), type=str(e.get("type") or "thing"))


def community_item(row: dict[str, Any]) -> CommunityItem:
    """A row {community, members} of the store as the API shows it."""
    c = row["community"]
    return CommunityItem(id=str(c["id"]), size=len(row["members"]), members=[entity_summary(m) for m in row["members"]],
                         predicates=list(c.get("predicates") or []), summary=str(c.get("summary") or ""),
                         summary_source=str(c.get("summary_source") or "offline"), updated_at=c.get("updated_at"))
