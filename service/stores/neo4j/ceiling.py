"""The sensitivity ceiling in the graph's reads (service/core/sensitivity.py; docs/decisions.md "Sensitivity tiers").

The ceiling is the one of the request being served. A (:Memory) node carries its tier (`sensitivity`; none on a
node written before tiers: `internal`). A fact is visible when at least one memory that supports it is within the
ceiling; an entity when a memory within it mentions it (one no memory mentions, written by a structured write, is
`internal`); a community lists only visible members and is dropped below two, without its summary when a member
was hidden. Without a ceiling (or under `secret`) nothing is filtered and no statement is run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.core.sensitivity import Sensitivity, allowed, current, visible
from service.stores.neo4j.executor import Neo4jExecutor

VISIBLE_MEMORIES: LiteralString = """
MATCH (m:Memory) WHERE m.id IN $ids AND coalesce(m.sensitivity, 'internal') IN $tiers
RETURN m.id AS id
"""

HIDDEN_MEMORIES: LiteralString = """
MATCH (m:Memory) WHERE m.id IN $ids AND NOT coalesce(m.sensitivity, 'internal') IN $tiers
RETURN m.id AS id
"""

VISIBLE_ENTITIES: LiteralString = """
MATCH (e:Entity) WHERE e.id IN $ids
  AND (EXISTS { MATCH (m:Memory)-[:MENTIONS]->(e) WHERE coalesce(m.sensitivity, 'internal') IN $tiers }
       OR ('internal' IN $tiers AND NOT EXISTS { MATCH (:Memory)-[:MENTIONS]->(e) }))
RETURN e.id AS id
"""

VISIBLE_NAMES: LiteralString = """
MATCH (e:Entity {user_id: $user_id}) WHERE e.name IN $ids
  AND (EXISTS { MATCH (m:Memory)-[:MENTIONS]->(e) WHERE coalesce(m.sensitivity, 'internal') IN $tiers }
       OR ('internal' IN $tiers AND NOT EXISTS { MATCH (:Memory)-[:MENTIONS]->(e) }))
RETURN DISTINCT e.name AS id
"""


def _tiers() -> list[str] | None:
    tiers = allowed(current())
    return None if tiers is None else [t.value for t in tiers]


class Ceiling:
    """Filters of the graph's reads by the current ceiling: each part that reads rows a ceiling may hide holds one
    (over the shared executor)."""

    def __init__(self, executor: Neo4jExecutor) -> None:
        self._exec = executor

    async def _visible(self, stmt: LiteralString, ids: Iterable[str], tiers: list[str], **params: Any) -> set[str]:
        wanted = sorted({str(i) for i in ids if i})
        if not wanted:
            return set()

        async def run(tx: AsyncManagedTransaction) -> set[str]:
            return {str(r["id"]) for r in await (await tx.run(stmt, ids=wanted, tiers=tiers, **params)).data()}

        found: set[str] = await self._exec.read(run)
        return found

    async def visible_memory_ids(self, ids: Iterable[str]) -> set[str] | None:
        """Which of these memories the current ceiling lets through; None: every one (no ceiling)."""
        tiers = _tiers()
        return None if tiers is None else await self._visible(VISIBLE_MEMORIES, ids, tiers)

    async def visible_entity_ids(self, ids: Iterable[str]) -> set[str] | None:
        tiers = _tiers()
        return None if tiers is None else await self._visible(VISIBLE_ENTITIES, ids, tiers)

    async def keep_facts(self, rows: list[Any], get: Any = None) -> list[Any]:
        """The facts (or rows holding one: `get(row)` is the fact's map) with a supporting memory within the
        ceiling (a fact no live memory states any more: one that stated it, `former_memory_ids`)."""
        if _tiers() is None or not rows:
            return rows
        facts = [_support(get(r) if get else r) for r in rows]
        seen = await self.visible_memory_ids(i for f in facts for i in f) or set()
        return [r for r, f in zip(rows, facts, strict=True) if any(i in seen for i in f)]

    async def keep_memories(self, rows: list[Any], get: Any = None) -> list[Any]:
        """The rows whose memory id (`get(row)`, default the row's `id`) is within the ceiling."""
        if _tiers() is None or not rows:
            return rows
        ids = [str(get(r) if get else _field(r, "id")) for r in rows]
        seen = await self.visible_memory_ids(ids) or set()
        return [r for r, i in zip(rows, ids, strict=True) if i in seen]

    async def keep_entities(self, rows: list[Any], get: Any = None) -> list[Any]:
        if _tiers() is None or not rows:
            return rows
        ids = [str(get(r) if get else _field(r, "id")) for r in rows]
        seen = await self.visible_entity_ids(ids) or set()
        return [r for r, i in zip(rows, ids, strict=True) if i in seen]

    async def keep_messages(self, rows: list[Any], get: Any = None) -> list[Any]:
        """Conversation messages (`get(row)` is the message's map) without those a memory above the ceiling was
        drawn from: the message says what the memory says."""
        tiers = _tiers()
        if tiers is None or not rows:
            return rows
        messages = [get(r) if get else r for r in rows]
        hidden = await self._visible(HIDDEN_MEMORIES, (str(i) for m in messages for i in m.get("memory_ids") or []),
                                     tiers)
        return [r for r, m in zip(rows, messages, strict=True)
                if not any(str(i) in hidden for i in m.get("memory_ids") or [])]

    async def keep_entity_hits(self, user_id: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Entity hits (with the names of their `related` entities) without what the ceiling hides."""
        tiers = _tiers()
        if tiers is None or not rows:
            return rows
        kept = await self.keep_entities(rows)
        names = await self._visible(VISIBLE_NAMES, (n for r in kept for n in r.get("related") or []), tiers,
                                    user_id=user_id)
        return [{**r, "related": [n for n in r.get("related") or [] if n in names]} for r in kept]

    async def keep_communities(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Communities (rows of `community` and `members`) with their hidden members left out."""
        if _tiers() is None or not rows:
            return rows
        seen = await self.visible_entity_ids(str(m["id"]) for r in rows for m in r["members"]) or set()
        out: list[dict[str, Any]] = []
        for r in rows:
            members = [m for m in r["members"] if str(m["id"]) in seen]
            if len(members) < 2:
                continue
            community = dict(r["community"])
            if len(members) < len(r["members"]):  # its summary may tell what the hidden members say
                community.update(summary=None, summary_source=None, predicates=[])
            out.append({**r, "community": community, "members": members})
        return out


def _field(row: Any, name: str) -> Any:
    return row.get(name) if isinstance(row, dict) else getattr(row, name, None)


def trace_visible(trace: dict[str, Any]) -> bool:
    """A retrieval trace keeps the ceiling it was searched under (none recorded: `secret`); a reader whose ceiling
    is lower does not see it: its query and hits are what that search could see."""
    return visible(trace.get("max_sensitivity") or Sensitivity.SECRET.value)


def _support(fact: Any) -> list[str]:
    ids = _field(fact, "memory_ids") or _field(fact, "former_memory_ids") or []
    return [str(i) for i in ids]
