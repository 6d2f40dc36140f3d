"""Graph store Protocol. Backend: `neo4j_graph` (async driver, managed transactions).

All Cypher lives in the backend module.
"""

from __future__ import annotations

from typing import Protocol

from service.domain import Memory


class GraphStore(Protocol):
    name: str

    async def ensure_schema(self) -> None:
        """Create constraints and indexes if missing (idempotent)."""

    async def upsert_memories(self, memories: list[Memory]) -> None:
        """MERGE one (:Memory) node per memory on its id (a replay converges)."""

    async def count_memories(self, user_id: str) -> int: ...

    async def ping(self) -> None:
        """Raise DependencyUnavailable if the graph cannot serve requests."""

    async def close(self) -> None: ...
