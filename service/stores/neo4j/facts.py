"""The graph as an API (docs/graph.md): the reads of facts about one entity and of structural queries
(`FactGraph`, the `FactStore` part). What a write did to the entities it named is links.py's."""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.stores.graph import EntityNameRules
from service.stores.neo4j.ceiling import Ceiling
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.resolution import KEY_INDEX, key_query
from service.stores.neo4j.rows import (
    MAX_PAGE_LIMIT,
    check_groups,
    check_id,
    clamp,
    edge_item,
    entity_name,
    ft_key,
    offset_of,
)

MAX_MERGE_HOPS = 5
MAX_FACTS_LIMIT = 1000  # entities and facts of one `entity_facts` read (the console's graph page)
ALL_FACTS = 2**62  # one entity's facts are not cut before they are ordered (the API pages through all of them)

# ---- reads --------------------------------------------------------------------------------------------------

_ENTITY_FIELDS: LiteralString = "{.id, .name, .type, .aliases, .group_id, .description, .attributes, .merged_into}"

_BY_ID: LiteralString = """
MATCH (e:Entity {id: $id}) WHERE e.user_id = $user_id
RETURN e""" + _ENTITY_FIELDS + """ AS e
"""

_BY_NAME_ORDER: LiteralString = """
RETURN e""" + _ENTITY_FIELDS + """ AS e
ORDER BY CASE WHEN e.merged_into IS NULL THEN 0 ELSE 1 END, CASE WHEN e.name_lc = $name_lc THEN 0 ELSE 1 END,
         e.group_id DESC, e.id
"""

# A name: the entity's own (lower-cased) name (index on user_id, name_lc) or the key of one of its spellings and
# aliases (the gate's keyword index `entity_keys`, one exact token per key); merged ones included (the caller
# follows merged_into).
_BY_NAME: LiteralString = """
CALL () {
    MATCH (e:Entity {user_id: $user_id, name_lc: $name_lc}) WHERE e.group_id IN $groups
    RETURN e
  UNION
    UNWIND $key_queries AS q
    CALL db.index.fulltext.queryNodes($key_index, q, {limit: 20}) YIELD node AS e
    WHERE e.user_id = $user_id AND e.group_id IN $groups
    RETURN e
}
WITH DISTINCT e""" + _BY_NAME_ORDER

# Without the gate (no keyword index): the user's entities of these groups (index on user_id, group_id).
_BY_NAME_SCAN: LiteralString = """
MATCH (e:Entity) WHERE e.user_id = $user_id AND e.group_id IN $groups
  AND (e.name_lc = $name_lc OR $key IN coalesce(e.keys, []) OR $name IN coalesce(e.aliases, []))
WITH e""" + _BY_NAME_ORDER

# Both directions; a merge's copies share the original's id (one row per id); the far end is a live entity
# (the edge of a merged entity lives on as its target's copy). Current facts first, then history, newest first.
# The facts with one end among the entities, each once (a merge's copy shares its edge's id), current first. Each
# entity brings at most $per_entity (a hub does not crowd out the others, nor is read whole). One record holding
# the list: the driver's per-record cost (a message read and decoded apiece) was most of the console's graph page's
# time for 240 rows (docs/benchmarks.md, "Web console pages").
_ENTITY_FACTS: LiteralString = """
MATCH (e:Entity) WHERE e.user_id = $user_id AND e.id IN $ids
CALL (e) {
  MATCH (e)-[r:RELATES]-(o:Entity)
  WHERE o <> e AND r.fact IS NOT NULL AND ($history OR (r.invalid_at IS NULL AND r.expired_at IS NULL))
    AND (NOT $live_ends OR (e.merged_into IS NULL AND o.merged_into IS NULL))
  RETURN r, o, startNode(r) = e AS out LIMIT $per_entity
}
WITH r.id AS id, collect({r: r, out: out, o: o})[0] AS x
WITH x.r AS r, x.out AS out, x.o AS o, x.r.invalid_at IS NULL AND x.r.expired_at IS NULL AS current
ORDER BY CASE WHEN current THEN 0 ELSE 1 END, r.valid_at DESC, r.id
SKIP $offset LIMIT $limit
RETURN collect({fact: r{.id, .predicate, .fact, .valid_at, .invalid_at, .expired_at, .memory_ids, .group_id,
                        .created_at, .confidence, .migrated_from, source: startNode(r).name,
                        target: endNode(r).name, source_id: startNode(r).id, target_id: endNode(r).id},
                out: out, current: current, other: o{.id, .name, .type}}) AS facts
"""

# Structural query: typed relations with optional ends. The validity at `as_of` (a fact stated by a live memory,
# valid then), else the current facts. From the objects when named (their edges), else the user's edges.
_QUERY_WHERE: LiteralString = """
WHERE r.user_id = $user_id AND r.group_id IN $groups AND s.merged_into IS NULL AND o.merged_into IS NULL
  AND ($predicates IS NULL OR r.predicate IN $predicates)
  AND ($subjects IS NULL OR s.id IN $subjects)
  AND ($subject_types IS NULL OR s.type IN $subject_types)
  AND ($object_types IS NULL OR o.type IN $object_types)
  AND r.fact IS NOT NULL
  AND CASE WHEN $as_of IS NULL THEN r.invalid_at IS NULL AND r.expired_at IS NULL
           ELSE size(r.memory_ids) > 0 AND r.valid_at <= $as_of AND (r.invalid_at IS NULL OR r.invalid_at > $as_of)
      END
WITH DISTINCT r, s, o
ORDER BY r.valid_at DESC, r.id
SKIP $offset LIMIT $limit
RETURN r{.id, .predicate, .fact, .valid_at, .invalid_at, .expired_at, .memory_ids, .group_id, .confidence} AS fact,
       s{.id, .name, .type} AS subject, o{.id, .name, .type} AS object
"""

_QUERY_BY_OBJECT: LiteralString = """
MATCH (o:Entity) WHERE o.id IN $objects
MATCH (s:Entity)-[r:RELATES]->(o)
""" + _QUERY_WHERE

_QUERY_BY_SUBJECT: LiteralString = """
MATCH (s:Entity) WHERE s.id IN $subjects
MATCH (s)-[r:RELATES]->(o:Entity)
""" + _QUERY_WHERE

_QUERY_ALL: LiteralString = """
MATCH (s:Entity)-[r:RELATES]->(o:Entity)
""" + _QUERY_WHERE


class FactGraph:
    """Entity lookups, facts about an entity and structural queries (`FactStore`). `names`: how a name is keyed."""

    def __init__(self, executor: Neo4jExecutor, names: EntityNameRules) -> None:
        self._exec = executor
        self._ceiling = Ceiling(executor)
        self._names = names

    async def find_entity(self, user_id: str, groups: list[str], *, entity_id: str | None = None,
                          name: str | None = None) -> dict[str, Any] | None:
        """The live entity an id or a name (its own, a spelling's key, an alias) stands for: a merged entity's
        target (followed through merges). None when the user's graph has none."""
        check_id(user_id, "user_id")
        checked = check_groups(groups) or []
        if entity_id is not None:
            check_id(entity_id, "entity id")
        clean = entity_name(name or "")

        async def run(tx: AsyncManagedTransaction) -> dict[str, Any] | None:
            if entity_id is not None:
                rows = await (await tx.run(_BY_ID, id=entity_id, user_id=user_id)).data()
            elif self._names.resolves:
                key = self._names.name_key(clean)
                queries = [key_query(ft_key(user_id, g), [key]) for g in checked] if key else []
                rows = await (await tx.run(_BY_NAME, user_id=user_id, groups=checked, name_lc=clean.casefold(),
                                           key_queries=queries, key_index=KEY_INDEX)).data()
            else:
                rows = await (await tx.run(_BY_NAME_SCAN, user_id=user_id, groups=checked, name_lc=clean.casefold(),
                                           key=self._names.name_key(clean), name=clean)).data()
            if not rows:
                return None
            found: dict[str, Any] = rows[0]["e"]
            for _ in range(MAX_MERGE_HOPS):
                if not found.get("merged_into"):
                    break
                rows = await (await tx.run(_BY_ID, id=found["merged_into"], user_id=user_id)).data()
                if not rows:
                    break
                found = rows[0]["e"]
            return found

        if entity_id is None and not clean:
            return None
        result: dict[str, Any] | None = await self._exec.read(run)
        if result is not None and not await self._ceiling.keep_entities([result]):
            return None  # only memories above the sensitivity ceiling mention it
        return result

    async def entity_facts(self, user_id: str, entity_ids: list[str], *, include_history: bool, limit: int,
                           cursor: str | None = None, live_ends: bool = True
                           ) -> tuple[list[dict[str, Any]], str | None]:
        """The facts with one end among these entities, each once, current first then history (newest first)."""
        check_id(user_id, "user_id")
        ids = [check_id(i, "entity id") for i in entity_ids[:MAX_FACTS_LIMIT]]
        if not ids:
            return [], None
        limit = clamp(limit, MAX_FACTS_LIMIT)
        offset = offset_of(cursor)
        per_entity = max(10, limit // len(ids)) if len(ids) > 1 else ALL_FACTS

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(_ENTITY_FACTS, user_id=user_id, ids=ids, history=include_history,
                                  live_ends=live_ends, per_entity=per_entity, offset=offset, limit=limit + 1)
            record = await result.single(strict=True)
            return [{**r, "fact": {**edge_item(r["fact"]), "confidence": r["fact"].get("confidence")}}
                    for r in record["facts"]]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        more = len(rows) > limit
        return await self._ceiling.keep_facts(rows[:limit], lambda r: r["fact"]), str(offset + limit) if more else None

    async def query_facts(self, user_id: str, groups: list[str], *, subjects: list[str] | None,
                          objects: list[str] | None, predicates: list[str] | None, subject_types: list[str] | None,
                          object_types: list[str] | None, as_of: str | None, limit: int, cursor: str | None
                          ) -> tuple[list[dict[str, Any]], str | None]:
        """Typed relations matching every given filter (None: any), valid at `as_of` (None: current)."""
        check_id(user_id, "user_id")
        checked = check_groups(groups) or []
        limit = clamp(limit, MAX_PAGE_LIMIT)
        offset = offset_of(cursor)
        stmt = _QUERY_BY_OBJECT if objects is not None else _QUERY_BY_SUBJECT if subjects is not None else _QUERY_ALL

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(stmt, user_id=user_id, groups=checked, subjects=subjects, objects=objects,
                                  predicates=predicates, subject_types=subject_types, object_types=object_types,
                                  as_of=as_of, offset=offset, limit=limit + 1)
            return await result.data()

        rows: list[dict[str, Any]] = await self._exec.read(run)
        more = len(rows) > limit
        return await self._ceiling.keep_facts(rows[:limit], lambda r: r["fact"]), str(offset + limit) if more else None
