"""The graph as an API: the reads of facts about one entity and of structural queries (part of `GraphStore`;
Neo4j: service/stores/neo4j/facts.py). docs/graph.md."""

from __future__ import annotations

from typing import Any, Protocol


class FactStore(Protocol):
    async def find_entity(self, user_id: str, groups: list[str], *, entity_id: str | None = None,
                          name: str | None = None) -> dict[str, Any] | None:
        """The live entity (id, name, type, aliases, group_id, description, attributes) an id or a name stands
        for: its own name, a spelling's key or an alias, and a merged entity's target. None if none."""

    async def entity_facts(self, user_id: str, entity_ids: list[str], *, include_history: bool, limit: int,
                           cursor: str | None = None, live_ends: bool = True
                           ) -> tuple[list[dict[str, Any]], str | None]:
        """Rows {fact, out, current, other} of the facts with one end among these entities (the API: one live
        entity; the console: the entities it draws), each once, current first then history (newest first), and the
        next cursor. `fact` has the source's and the target's names and ids; `out`: the entity is its source (the
        first one's, for several); `live_ends`: only facts between entities not merged away; `include_history`:
        superseded ones too. Several entities each bring at most their share of `limit` (a hub does not crowd out
        the others, nor is read whole)."""

    async def query_facts(self, user_id: str, groups: list[str], *, subjects: list[str] | None,
                          objects: list[str] | None, predicates: list[str] | None, subject_types: list[str] | None,
                          object_types: list[str] | None, as_of: str | None, limit: int, cursor: str | None
                          ) -> tuple[list[dict[str, Any]], str | None]:
        """Rows {fact, subject, object} of the typed relations matching every filter given (None: any), valid at
        `as_of` (None: the current facts), newest first, and the next cursor."""


class CommunityStore(Protocol):
    """Entity communities (Neo4j: service/stores/neo4j/communities.py)."""

    async def live_relations(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        """Rows {source, target, predicate, s, o} of the user's current relations between live entities."""

    async def replace_communities(self, user_id: str, communities: list[dict[str, Any]], now: str) -> None:
        """The user's communities become these ({id, size, predicates, summary, summary_source,
        members: [{id, rank}]}), in one transaction."""

    async def list_communities(self, user_id: str, limit: int, cursor: str | None
                               ) -> tuple[list[dict[str, Any]], str | None]:
        """Rows {community, members} (members live, best ranked first; a community with fewer than two live
        members is left out), biggest first, and the next cursor."""

    async def communities_of(self, user_id: str, entity_ids: list[str], limit: int) -> list[dict[str, Any]]:
        """Rows {community, members} of the communities these entities belong to, most matched first."""
