"""Entity curation and provenance in the Neo4j graph store: the duplicate review queue, reversible
merges, graph statistics (retrieval traces: traces.py): `GraphCuration`. The merge statement is
cypher_writes.MERGE_ENTITIES: an import's identity replay (`import_identity`, memories.py) runs it too.

A merge of source S into target T marks S (`merged_into`, `merged_at`), adds S's names to T's aliases (and
its keys to T's keys), keeps the longer description, and *copies* S's MENTIONS, RELATES (both directions),
SAME_AS and TOUCHED edges onto T, each copy carrying `migrated_from: S` (a RELATES copy keeps the edge's id,
so lifecycle operations that find edges by id keep both in step). S keeps its own edges; what the merge added
to T is recorded on S, so an unmerge removes exactly that. Reads follow `merged_into` to T."""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.core.errors import Conflict, DomainError, NotFound
from service.stores.graph import EntityNameRules
from service.stores.neo4j import cypher_writes
from service.stores.neo4j.ceiling import Ceiling
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import MAX_PAGE_LIMIT, check_groups, check_id, clamp

ENTITY_CARD: LiteralString = """{.id, .name, .type, .aliases, .roles, .group_id, .merged_into,
    mentions: COUNT { (x)<-[:MENTIONS]-(:Memory) }}"""

DUPLICATES: LiteralString = """
MATCH (s:Entity)-[r:SAME_AS]->(t:Entity)
WHERE r.user_id = $user_id AND r.status = 'pending' AND ($groups IS NULL OR r.group_id IN $groups)
  AND s.merged_into IS NULL AND t.merged_into IS NULL
  AND (r.score < $score OR (r.score = $score AND s.id + '|' + t.id > $key))
WITH s, r, t ORDER BY r.score DESC, s.id + '|' + t.id LIMIT $limit
CALL (s) { WITH s AS x RETURN x """ + ENTITY_CARD + """ AS source }
CALL (t) { WITH t AS x RETURN x """ + ENTITY_CARD + """ AS target }
RETURN source, target, r{.score, .match_type, .reason, .group_id, .created_at, .status} AS pair
"""

PAIR: LiteralString = """
MATCH (s:Entity {id: $source_id})-[r:SAME_AS]-(t:Entity {id: $target_id})
WHERE r.user_id = $user_id AND coalesce(r.migrated_from, '') = ''
RETURN r.status AS status, startNode(r).id AS from_id
"""

ENTITY: LiteralString = """
MATCH (x:Entity {id: $id}) WHERE x.user_id = $user_id
RETURN x{.id, .name, .type, .group_id, .merged_into, .aliases, .keys, .description} AS e
"""

REVIEW: LiteralString = """
MATCH (s:Entity {id: $source_id})-[r:SAME_AS]-(t:Entity {id: $target_id})
WHERE r.user_id = $user_id AND coalesce(r.migrated_from, '') = ''
SET r.status = $status, r.reviewed_at = $now, r.reviewer = $reviewer
WITH s, t, r WHERE $status = 'rejected'
SET s.not_same_as = reduce(acc = coalesce(s.not_same_as, []), k IN coalesce(t.keys, []) |
                           CASE WHEN k IN acc OR k IN coalesce(s.keys, []) THEN acc ELSE acc + k END),
    t.not_same_as = reduce(acc = coalesce(t.not_same_as, []), k IN coalesce(s.keys, []) |
                           CASE WHEN k IN acc OR k IN coalesce(t.keys, []) THEN acc ELSE acc + k END)
"""

# The hints: with few merged entities in the store the planner scanned the merged_into / merged_via indexes
# (every user's merged entities) instead of seeking, or walked the target's relationships of a type.
UNMERGE: LiteralString = """
MATCH (s:Entity {id: $id}) USING INDEX s:Entity(id) WHERE s.user_id = $user_id AND s.merged_into IS NOT NULL
MATCH (t:Entity {id: s.merged_into})
CALL (s, t) {  // the copies by the migrated_from indexes: the target may be a hub, its relationships are not walked
    MATCH ()-[c:RELATES {migrated_from: s.id}]->() USING INDEX SEEK c:RELATES(migrated_from)
    WHERE startNode(c) = t OR endNode(c) = t
    DELETE c
}
CALL (s, t) {
    MATCH ()-[c:MENTIONS {migrated_from: s.id}]->() USING INDEX SEEK c:MENTIONS(migrated_from)
    WHERE endNode(c) = t
    DELETE c
}
CALL (s, t) {
    MATCH ()-[c:SAME_AS {migrated_from: s.id}]->() USING INDEX SEEK c:SAME_AS(migrated_from)
    WHERE startNode(c) = t OR endNode(c) = t
    DELETE c
}
CALL (s, t) {
    MATCH ()-[c:TOUCHED {migrated_from: s.id}]->() USING INDEX SEEK c:TOUCHED(migrated_from)
    WHERE endNode(c) = t
    DELETE c
}
CALL (s, t) {  // undone: the pair is for review again
    MATCH (s)-[r:SAME_AS]-(t) WHERE coalesce(r.migrated_from, '') = ''
    SET r.status = 'pending', r.reviewed_at = null, r.reviewer = null
}
CALL (s, t) {
    MATCH (a:Entity {merged_via: s.id}) USING INDEX SEEK a:Entity(merged_via) WHERE a.merged_into = t.id
    SET a.merged_into = s.id, a.merged_via = null
}
SET t.aliases = [n IN t.aliases WHERE NOT n IN coalesce(s.merged_aliases, [])],
    t.keys = [k IN coalesce(t.keys, []) WHERE NOT k IN coalesce(s.merged_keys, [])],
    t.description = CASE WHEN s.replaced_description IS NULL THEN t.description
                         ELSE nullif(s.replaced_description, '') END,
    s.unmerged_at = $now,
    s.merged_into = null, s.merged_at = null, s.merged_aliases = null, s.merged_keys = null,
    s.replaced_description = null
RETURN t.id AS target_id
"""

STATS: LiteralString = """
CALL () {
    MATCH (m:Memory {user_id: $user_id}) WHERE m.deleted_at IS NULL AND ($groups IS NULL OR m.group_id IN $groups)
    RETURN count(m) AS memories
}
CALL () {
    MATCH (e:Entity {user_id: $user_id}) WHERE $groups IS NULL OR e.group_id IN $groups
    RETURN count(e) AS entities, count(e.merged_into) AS merged
}
CALL () {
    MATCH ()-[r:RELATES]->() WHERE r.user_id = $user_id AND ($groups IS NULL OR r.group_id IN $groups)
      AND r.migrated_from IS NULL
    RETURN count(CASE WHEN r.invalid_at IS NULL AND r.expired_at IS NULL THEN 1 END) AS live,
           count(CASE WHEN r.invalid_at IS NOT NULL OR r.expired_at IS NOT NULL THEN 1 END) AS expired
}
CALL () {
    MATCH ()-[r:SAME_AS]->() WHERE r.user_id = $user_id AND ($groups IS NULL OR r.group_id IN $groups)
      AND r.migrated_from IS NULL
    RETURN count(CASE r.status WHEN 'pending' THEN 1 END) AS pending,
           count(CASE r.status WHEN 'confirmed' THEN 1 END) AS confirmed,
           count(CASE r.status WHEN 'rejected' THEN 1 END) AS rejected
}
CALL () {
    MATCH (t:Trace {user_id: $user_id}) WHERE t.expires_at > $now
    RETURN count(t) AS traces
}
RETURN memories, entities, merged, live, expired, pending, confirmed, rejected, traces
"""


class GraphCuration:
    """Entity curation: the review queue, merges and unmerges, statistics. `names`: which types may merge."""

    def __init__(self, executor: Neo4jExecutor, names: EntityNameRules) -> None:
        self._exec = executor
        self._ceiling = Ceiling(executor)
        self._names = names

    async def list_duplicates(self, user_id: str, groups: list[str] | None, limit: int,
                              cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """Pending SAME_AS pairs, highest score first. The cursor is "<score>|<source id>|<target id>"."""
        check_id(user_id, "user_id")
        score, key = 2.0, ""
        if cursor:
            head, _, key = cursor.partition("|")
            try:
                score = float(head)
            except ValueError as exc:
                raise DomainError("cursor is not one this listing returned") from exc
        n = clamp(limit, MAX_PAGE_LIMIT)

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(DUPLICATES, user_id=user_id, groups=check_groups(groups), score=score, key=key,
                                  limit=n + 1)
            return list(await result.data())

        rows: list[dict[str, Any]] = await self._exec.read(run)
        more = len(rows) > n
        rows = rows[:n]
        last = rows[-1] if more and rows else None
        next_cursor = f"{last['pair']['score']}|{last['source']['id']}|{last['target']['id']}" if last else None
        seen = await self._ceiling.visible_entity_ids(str(r[end]["id"]) for r in rows for end in ("source", "target"))
        if seen is not None:  # a pair of which one entity is above the sensitivity ceiling is not shown
            rows = [r for r in rows if str(r["source"]["id"]) in seen and str(r["target"]["id"]) in seen]
        return rows, next_cursor

    async def entity(self, user_id: str, entity_id: str) -> dict[str, Any]:
        check_id(entity_id, "entity id")

        async def run(tx: AsyncManagedTransaction) -> dict[str, Any] | None:
            rec = await (await tx.run(ENTITY, id=entity_id, user_id=user_id)).single()
            return dict(rec["e"]) if rec else None

        found: dict[str, Any] | None = await self._exec.read(run)
        if found is None:
            raise NotFound(f"entity {entity_id} not found")
        return found

    async def review_duplicate(self, user_id: str, source_id: str, target_id: str, confirm: bool,
                               reviewer: str | None, now: str) -> dict[str, Any]:
        """Confirm (merge source into target) or reject (never proposed again) a pair the gate proposed."""
        async def pair(tx: AsyncManagedTransaction) -> dict[str, Any] | None:
            rec = await (await tx.run(PAIR, source_id=source_id, target_id=target_id, user_id=user_id)).single()
            return dict(rec) if rec else None

        found: dict[str, Any] | None = await self._exec.read(pair)
        if found is None:
            raise NotFound(f"no duplicate pair between {source_id} and {target_id}")
        if confirm:
            result = await self.merge_entities(user_id, source_id, target_id, now, reviewer=reviewer)
            return {**result, "status": "confirmed"}
        if found["status"] == "confirmed":
            source = await self.entity(user_id, source_id)
            if source.get("merged_into"):
                raise Conflict("this pair was merged: unmerge the source first")

        async def reject(tx: AsyncManagedTransaction) -> None:
            await (await tx.run(REVIEW, source_id=source_id, target_id=target_id, user_id=user_id,
                                status="rejected", now=now, reviewer=reviewer)).consume()

        await self._exec.write(reject)
        return {"status": "rejected", "source_id": source_id, "target_id": target_id, "merged_into": None}

    async def merge_entities(self, user_id: str, source_id: str, target_id: str, now: str,
                             reviewer: str | None = None) -> dict[str, Any]:
        check_id(user_id, "user_id")
        if source_id == target_id:
            raise DomainError("source_id and target_id are the same entity")
        source = await self.entity(user_id, source_id)
        target = await self.entity(user_id, target_id)
        if target.get("merged_into"):
            raise Conflict(f"target {target_id} is merged into {target['merged_into']}: merge into that one")
        if source.get("merged_into") not in (None, target_id):
            raise Conflict(f"source {source_id} is already merged into {source['merged_into']}")
        if source["group_id"] != target["group_id"]:
            raise DomainError("entities of different groups (global / project) never merge")
        if not self._names.compatible(str(source.get("type") or "thing"), str(target.get("type") or "thing")):
            raise DomainError(f"a {source.get('type')} and a {target.get('type')} never merge")

        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run(cypher_writes.MERGE_ENTITIES, source_id=source_id, target_id=target_id, user_id=user_id,
                                now=now)).consume()
            if reviewer is not None:
                await (await tx.run(REVIEW, source_id=source_id, target_id=target_id, user_id=user_id,
                                    status="confirmed", now=now, reviewer=reviewer)).consume()

        await self._exec.write(run)
        return {"status": "merged", "source_id": source_id, "target_id": target_id, "merged_into": target_id}

    async def unmerge_entity(self, user_id: str, entity_id: str, now: str) -> dict[str, Any]:
        source = await self.entity(user_id, entity_id)
        if not source.get("merged_into"):
            raise Conflict(f"entity {entity_id} is not merged")

        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run(UNMERGE, id=entity_id, user_id=user_id, now=now)).consume()

        await self._exec.write(run)
        return {"status": "unmerged", "source_id": entity_id, "target_id": source["merged_into"], "merged_into": None}

    async def graph_stats(self, user_id: str, groups: list[str] | None, now: str) -> dict[str, int]:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> dict[str, int]:
            rec = await (await tx.run(STATS, user_id=user_id, groups=check_groups(groups), now=now)).single()
            return {k: int(v) for k, v in dict(rec or {}).items()}

        stats: dict[str, int] = await self._exec.read(run)
        return stats
