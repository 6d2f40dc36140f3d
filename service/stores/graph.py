"""Graph store Protocol. Backend: `neo4j_graph` (async driver, managed transactions).

All Cypher lives in the backend module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from service.domain import Memory


@dataclass(frozen=True)
class EntityRef:
    name: str
    type: str = "thing"


@dataclass(frozen=True)
class RelationRef:
    subject: str
    predicate: str
    object: str
    fact: str
    valid_at: str | None = None


@dataclass(frozen=True)
class MemoryLinks:
    """What one memory says in graph terms: the entities it mentions and the facts it supports."""

    memory_id: str
    entities: list[EntityRef] = field(default_factory=list)
    relations: list[RelationRef] = field(default_factory=list)


class GraphStore(Protocol):
    name: str

    async def ensure_schema(self) -> None:
        """Create constraints and indexes if missing (idempotent)."""

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None) -> None:
        """In one transaction: MERGE a (:Memory) node per memory, the (:Entity) nodes its links name
        (scoped to the memory's user and group), (:Memory)-[:MENTIONS]->(:Entity) and
        (:Entity)-[:RELATES]->(:Entity) edges whose `memory_ids` include the memory.
        Every MERGE is on a deterministic id, so a replay changes nothing."""

    async def entities(self, user_id: str) -> list[dict[str, object]]:
        """Every entity of the user (introspection and tests)."""

    async def relations(self, user_id: str) -> list[dict[str, object]]:
        """Every RELATES edge of the user with source/target names (introspection and tests)."""

    async def count_memories(self, user_id: str) -> int: ...

    async def ping(self) -> None:
        """Raise DependencyUnavailable if the graph cannot serve requests."""

    async def close(self) -> None: ...
