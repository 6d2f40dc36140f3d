"""The graph reads the web console needs beyond the API's listings (part of `GraphStore`): entities by id or by
name, the facts a memory supports, the memories that mention an entity, merges (the facts around entities:
`FactStore.entity_facts`, the API's). Each is bounded by its `limit` and starts from an index (a user's entities, a
memory's mentions, an entity's mentions), so a page costs what it shows."""

from __future__ import annotations

from typing import Any, Protocol


class ConsoleReads(Protocol):
    async def entities(self, user_id: str, ids: list[str]) -> list[dict[str, Any]]:
        """The user's entities with these ids (merged ones too), as the node listing shows them."""

    async def find_entities(self, user_id: str, query: str, limit: int) -> list[dict[str, Any]]:
        """Live entities whose name or an alias contains `query` (case-insensitive; "" = any), the most connected
        first, each with its `degree`."""

    async def memory_facts(self, user_id: str, memory_id: str, limit: int) -> list[dict[str, Any]]:
        """The facts this memory supports, superseded ones included."""

    async def merged_entities(self, user_id: str, into: str | None, limit: int) -> list[dict[str, Any]]:
        """Entities merged into another (into `into` only, when given)."""

    async def entity_memories(self, user_id: str, entity_id: str, limit: int) -> list[str]:
        """The ids of the live memories that mention the entity, newest first."""
