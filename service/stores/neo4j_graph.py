"""Neo4j backend of the GraphStore Protocol (async driver, `execute_write`/`execute_read`).

Temporal model of a RELATES edge: `valid_at` is when the fact became true, `invalid_at` when it
stopped being true (a newer single-valued fact, or an update that no longer states it), and
`expired_at` when the graph stopped treating it as current (invalidation or loss of every
supporting memory). Edges and (:Memory) nodes are never deleted: history stays queryable.

Full-text search is multi-tenant: every Entity and RELATES edge carries `ft_key`, one Lucene
token derived from (user, group), and each query requires one of the caller's keys. So the
index's own `limit` only ever sees the caller's documents.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, date, datetime
from typing import Any, LiteralString

import structlog
from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable, TransientError

from service.domain import ID_NAMESPACE, Memory
from service.errors import DependencyUnavailable, DomainError
from service.stores.graph import SINGLE_VALUED_PREDICATES, EntityRef, GraphFact, MemoryLinks, Page

log = structlog.get_logger(__name__)

ENTITY_TEXT_INDEX = "entity_text"
FACT_TEXT_INDEX = "relates_text"

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT memory_id IF NOT EXISTS FOR (m:Memory) REQUIRE m.id IS UNIQUE",
    "CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE",
    "CREATE INDEX memory_user IF NOT EXISTS FOR (m:Memory) ON (m.user_id, m.scope, m.project_id)",
    "CREATE INDEX memory_hash IF NOT EXISTS FOR (m:Memory) ON (m.hash)",
    "CREATE INDEX entity_user IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.group_id)",
    "CREATE INDEX entity_name IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.name_lc)",
    "CREATE INDEX relates_id IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.id)",
    "CREATE INDEX relates_user IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.user_id)",
    # cursor pagination: equality on the user, range + order on the id
    "CREATE INDEX memory_user_id IF NOT EXISTS FOR (m:Memory) ON (m.user_id, m.id)",
    "CREATE INDEX entity_user_id IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.id)",
    "CREATE INDEX relates_user_id IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.user_id, r.id)",
    # full-text (Lucene, analyzer standard-no-stop-words); 5.26 indexes LIST<STRING> (aliases) too.
    # invalid_at/expired_at are in the edge index only so a query can exclude history inside
    # Lucene (`-expired_at:[* TO *]`), before the index applies its limit.
    "CREATE FULLTEXT INDEX entity_text IF NOT EXISTS FOR (e:Entity) ON EACH [e.name, e.aliases, e.ft_key]",
    "CREATE FULLTEXT INDEX relates_text IF NOT EXISTS FOR ()-[r:RELATES]-() "
    "ON EACH [r.fact, r.ft_key, r.invalid_at, r.expired_at]",
)

# ---- bounds ---------------------------------------------------------------------------------

MAX_ID_CHARS = 128
MAX_GROUP_CHARS = 160
MAX_GROUPS = 64
MAX_QUERY_CHARS = 2000
MAX_TERMS = 32
MAX_TERM_CHARS = 64
MAX_SEARCH_LIMIT = 100
MAX_PAGE_LIMIT = 500
MAX_NAME_CHARS = 200
MAX_FACT_CHARS = 2000
MAX_PREDICATE_CHARS = 100
MAX_ALIASES = 20
REMOVE_BATCH = 100  # memories per transaction (halved on Neo4j's transaction memory limit)

# ---- search tuning ---------------------------------------------------------------------------

ENTITY_HITS = 20          # entities kept from the name/alias match
DIRECT_EDGES = 50         # edges read per matched entity
NEIGHBOURS = 10           # neighbours followed per matched entity
NEIGHBOUR_EDGES = 5       # edges read per neighbour
HUB_DEGREE = 200          # neighbours with more edges than this are not followed (no topical signal)
ONE_HOP_WEIGHT = 0.4      # a neighbour's edge counts this much of the entity match that reached it
RECENCY_HALF_LIFE_DAYS = 180.0

# ---- writes ---------------------------------------------------------------------------------

# A stale replay (older updated_at than the node) does not roll content back. `edge_ids` lists
# every edge the memory has ever supported (history included): lifecycle operations find the
# edges to touch through it (index seeks) instead of scanning all of the user's edges.
_UPSERT_MEMORIES: LiteralString = """
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
ON CREATE SET m.edge_ids = []
WITH m, row
WHERE m.deleted_at IS NULL AND (m.updated_at IS NULL OR m.updated_at <= row.updated_at)
SET m += row
"""

_UPSERT_ENTITIES: LiteralString = """
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
ON CREATE SET e.user_id = row.user_id, e.group_id = row.group_id, e.name = row.name,
              e.name_lc = row.name_lc, e.type = row.type, e.aliases = [], e.created_at = row.created_at
SET e.ft_key = row.ft_key,
    e.type = CASE WHEN e.type = 'thing' THEN row.type ELSE e.type END,
    e.aliases = reduce(acc = e.aliases, n IN row.names |
                       CASE WHEN n = e.name OR n IN acc OR size(acc) >= $max_aliases THEN acc ELSE acc + n END)
"""

_UPSERT_MENTIONS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.memory_id})
MATCH (e:Entity {id: row.entity_id})
MERGE (m)-[:MENTIONS]->(e)
"""

# A deleted memory, or a stale replay of an updated one, supports nothing.
# An invalidated edge stated again *after* it stopped being true lives again from the new
# valid_at; an edge that only lacked support (expired, not invalid) lives again with support.
_UPSERT_RELATIONS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.memory_id})
WHERE m.deleted_at IS NULL AND coalesce(m.updated_at, '') <= row.updated_at
MATCH (s:Entity {id: row.source_id})
MATCH (o:Entity {id: row.target_id})
MERGE (s)-[r:RELATES {id: row.id}]->(o)
ON CREATE SET r.user_id = row.user_id, r.group_id = row.group_id, r.predicate = row.predicate,
              r.valid_at = row.valid_at, r.invalid_at = null, r.expired_at = null,
              r.memory_ids = [], r.former_memory_ids = [], r.created_at = row.created_at
SET r.fact = row.fact, r.ft_key = row.ft_key,
    r.memory_ids = CASE WHEN row.memory_id IN r.memory_ids THEN r.memory_ids ELSE r.memory_ids + row.memory_id END,
    m.edge_ids = CASE WHEN row.id IN coalesce(m.edge_ids, []) THEN m.edge_ids
                      ELSE coalesce(m.edge_ids, []) + row.id END
WITH r, row,
     (r.invalid_at IS NOT NULL AND row.valid_at > r.invalid_at) AS restated,
     (r.invalid_at IS NULL AND r.expired_at IS NOT NULL) AS resupported
SET r.valid_at = CASE WHEN restated THEN row.valid_at ELSE r.valid_at END,
    r.invalid_at = CASE WHEN restated THEN null ELSE r.invalid_at END,
    r.expired_at = CASE WHEN restated OR resupported THEN null ELSE r.expired_at END
"""

# Single-valued predicates, run per new edge in valid_at order. First: a valid edge from the same
# subject with the same predicate that is strictly newer makes the new edge history...
_SUPERSEDE_NEW: LiteralString = """
MATCH (s:Entity {id: $source_id})-[n:RELATES {id: $id}]->()
WHERE n.invalid_at IS NULL AND n.expired_at IS NULL
MATCH (s)-[o:RELATES]->()
WHERE o.predicate = n.predicate AND o.id <> n.id AND o.invalid_at IS NULL AND o.expired_at IS NULL
  AND o.valid_at > n.valid_at
WITH n, min(o.valid_at) AS next
SET n.invalid_at = next, n.expired_at = $now
"""

# ... otherwise the new edge replaces every valid edge of that subject and predicate not newer.
_SUPERSEDE_OLD: LiteralString = """
MATCH (s:Entity {id: $source_id})-[n:RELATES {id: $id}]->()
WHERE n.invalid_at IS NULL AND n.expired_at IS NULL
MATCH (s)-[o:RELATES]->()
WHERE o.predicate = n.predicate AND o.id <> n.id AND o.invalid_at IS NULL AND o.expired_at IS NULL
  AND o.valid_at <= n.valid_at
SET o.invalid_at = n.valid_at, o.expired_at = $now
"""

# The edges a memory ever supported (index seeks through Memory.edge_ids).
_EDGES_OF: LiteralString = """
MATCH (m:Memory) WHERE m.id IN $memory_ids
UNWIND coalesce(m.edge_ids, []) AS eid
WITH DISTINCT eid
MATCH ()-[r:RELATES {id: eid}]->()
"""

# Update: edges the memory supported that its new links do not restate lose it; those left
# without a live supporter become invalid (the memory no longer says so).
_DROP_SUPPORT: LiteralString = _EDGES_OF + """
WITH r WHERE $memory_id IN r.memory_ids AND NOT r.id IN $keep
WITH r, [x IN r.memory_ids WHERE x <> $memory_id] AS rest, coalesce(r.former_memory_ids, []) AS former
SET r.memory_ids = rest,
    r.former_memory_ids = CASE WHEN $memory_id IN former THEN former ELSE former + $memory_id END
WITH r, rest
WHERE r.invalid_at IS NULL
  AND NOT any(x IN rest WHERE EXISTS { MATCH (lm:Memory {id: x}) WHERE lm.deleted_at IS NULL })
SET r.invalid_at = $now, r.expired_at = coalesce(r.expired_at, $now)
"""

# What a replace_memory call (identified by its `now`) invalidated: edges it took the memory's
# support from, and edges of the subjects/predicates it stated single-valued facts for.
# The same answer on a retry.
_INVALIDATED_BY: LiteralString = """
CALL () {
""" + _EDGES_OF + """
    WITH r WHERE NOT $memory_id IN r.memory_ids AND r.invalid_at IS NOT NULL AND r.expired_at = $now
    RETURN r.id AS id
  UNION
    UNWIND $keys AS key
    MATCH (s:Entity {id: key[0]})-[r:RELATES]->()
    WHERE r.predicate = key[1] AND r.invalid_at IS NOT NULL AND r.expired_at = $now
    RETURN r.id AS id
}
RETURN id ORDER BY id
"""

# MERGE, not MATCH: a delete that reaches the graph before the memory's own graph write leaves a
# tombstone, so the late write cannot bring the memory back (its relations check deleted_at).
_MARK_REMOVED: LiteralString = """
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
ON CREATE SET m.user_id = row.user_id, m.edge_ids = []
SET m.deleted_at = coalesce(m.deleted_at, $now),
    m.duplicate_of = coalesce(m.duplicate_of, row.duplicate_of)
"""

# A delete erases (issue 10): the removed nodes keep ids and times only; edges no memory states any more
# lose their text; entities no live memory mentions go, with their edges.
_ERASE_REMOVED: LiteralString = """
MATCH (m:Memory) WHERE m.id IN $memory_ids
SET m.content = null, m.metadata = null, m.hash = null
WITH collect(m) AS gone
UNWIND gone AS m
OPTIONAL MATCH (m)-[:MENTIONS]->(e:Entity)
WITH DISTINCT e WHERE e IS NOT NULL
  AND NOT EXISTS { MATCH (live:Memory)-[:MENTIONS]->(e) WHERE live.deleted_at IS NULL }
DETACH DELETE e
"""

_ERASE_FACTS: LiteralString = _EDGES_OF + """
WITH r WHERE size(r.memory_ids) = 0
SET r.fact = null
"""

# Removed memories (deleted or duplicates) stop supporting their edges. Edges left without
# support expire (they are not known to be false: invalid_at stays). A duplicate's survivor is
# not added to edges it did not support itself (issue 5: those edges expire).
_DROP_REMOVED: LiteralString = _EDGES_OF + """
WITH r WHERE any(x IN r.memory_ids WHERE x IN $memory_ids)
WITH r, [x IN r.memory_ids WHERE NOT x IN $memory_ids] AS supporters,
     [x IN r.memory_ids WHERE x IN $memory_ids] AS gone
SET r.memory_ids = supporters,
    r.former_memory_ids = reduce(acc = coalesce(r.former_memory_ids, []), x IN gone |
                                 CASE WHEN x IN acc THEN acc ELSE acc + x END)
WITH r
WHERE size(r.memory_ids) = 0 AND r.expired_at IS NULL
SET r.expired_at = $now
"""

# A survivor takes over its duplicates' edges in its own edge_ids.
_ADOPT_EDGES: LiteralString = """
UNWIND keys($dups) AS dup
MATCH (d:Memory {id: dup})
MATCH (sv:Memory {id: $dups[dup]})
UNWIND coalesce(d.edge_ids, []) AS eid
MATCH ()-[r:RELATES {id: eid}]->()
WHERE sv.id IN r.memory_ids
WITH sv, collect(DISTINCT eid) AS eids
SET sv.edge_ids = coalesce(sv.edge_ids, []) + [e IN eids WHERE NOT e IN coalesce(sv.edge_ids, [])]
"""

_EXPIRED_BY: LiteralString = _EDGES_OF + """
WITH r WHERE r.expired_at = $now AND size(r.memory_ids) = 0
RETURN r.id AS id ORDER BY id
"""

_LEGACY_MEMORY_USERS: LiteralString = """
MATCH (m:Memory) WHERE m.edge_ids IS NULL
RETURN DISTINCT m.user_id AS user_id LIMIT 100
"""

# One pass over the user's edges (index on RELATES.user_id), grouped by supporting memory.
_BACKFILL_EDGE_IDS: LiteralString = """
CALL () {
    MATCH ()-[r:RELATES]->() WHERE r.user_id = $user_id
    UNWIND r.memory_ids + coalesce(r.former_memory_ids, []) AS mid
    WITH mid, collect(DISTINCT r.id) AS eids
    MATCH (m:Memory {id: mid}) WHERE m.edge_ids IS NULL
    SET m.edge_ids = eids
}
MATCH (m:Memory {user_id: $user_id}) WHERE m.edge_ids IS NULL
SET m.edge_ids = []
"""

# ---- reads ----------------------------------------------------------------------------------

_FACT_FIELDS: LiteralString = """
r{.id, .fact, .predicate, .group_id, .valid_at, .invalid_at, .expired_at, .memory_ids, .created_at,
  source: startNode(r).name, target: endNode(r).name,
  source_id: startNode(r).id, target_id: endNode(r).id} AS fact
"""

_ENTITY_TEXT_HITS: LiteralString = """
CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $k}) YIELD node, score
WHERE score > 0 AND node.user_id = $user_id AND node.group_id IN $groups
RETURN node.id AS id, score
"""

_ENTITY_EXACT_HITS: LiteralString = """
MATCH (e:Entity {user_id: $user_id, name_lc: $name_lc})
WHERE e.group_id IN $groups
RETURN e.id AS id
"""

_ENTITY_EDGES: LiteralString = """
UNWIND $hits AS hit
MATCH (e:Entity {id: hit})
CALL (e) {
    MATCH (e)-[r:RELATES]-()
    WHERE $history OR (r.invalid_at IS NULL AND r.expired_at IS NULL)
    WITH r ORDER BY r.valid_at DESC LIMIT $direct
    RETURN r, 0 AS hop
  UNION
    WITH e WHERE COUNT { (e)-[:RELATES]-() } <= $hub
    MATCH (e)-[r0:RELATES]-(o:Entity)
    WHERE o <> e AND ($history OR (r0.invalid_at IS NULL AND r0.expired_at IS NULL))
      AND COUNT { (o)-[:RELATES]-() } <= $hub
    WITH o, max(r0.valid_at) AS seen ORDER BY seen DESC LIMIT $neighbours
    CALL (o, e) {
        MATCH (o)-[r:RELATES]-(x:Entity)
        WHERE x <> e AND ($history OR (r.invalid_at IS NULL AND r.expired_at IS NULL))
        WITH r ORDER BY r.valid_at DESC LIMIT $per_neighbour
        RETURN r
    }
    RETURN r, 1 AS hop
}
RETURN hit, hop, """ + _FACT_FIELDS

_FACT_TEXT_HITS: LiteralString = """
CALL db.index.fulltext.queryRelationships($index, $lucene, {limit: $k}) YIELD relationship AS r, score
WHERE score > 0 AND r.user_id = $user_id AND r.group_id IN $groups
  AND ($history OR (r.invalid_at IS NULL AND r.expired_at IS NULL))
RETURN score, """ + _FACT_FIELDS

_LIST_NODES: LiteralString = """
MATCH (e:Entity)
WHERE e.user_id = $user_id AND e.id > $cursor AND ($groups IS NULL OR e.group_id IN $groups)
WITH e ORDER BY e.user_id, e.id LIMIT $limit  // the (user_id, id) index order: no sort
RETURN e{.id, .name, .type, .aliases, .group_id, .created_at} AS item
"""

_LIST_EDGES: LiteralString = """
MATCH ()-[r:RELATES]->()
WHERE r.user_id = $user_id AND r.id > $cursor AND ($groups IS NULL OR r.group_id IN $groups)
  AND ($history OR (r.invalid_at IS NULL AND r.expired_at IS NULL))
WITH r ORDER BY r.user_id, r.id LIMIT $limit  // the (user_id, id) index order: no sort
RETURN """ + _FACT_FIELDS

_LIST_EPISODES: LiteralString = """
MATCH (m:Memory)
WHERE m.user_id = $user_id AND m.id > $cursor AND ($groups IS NULL OR m.group_id IN $groups)
WITH m ORDER BY m.user_id, m.id LIMIT $limit  // the (user_id, id) index order: no sort
RETURN m{.id, .content, .category, .scope, .project_id, .group_id, .agent_id, .created_at, .updated_at,
         .deleted_at, .duplicate_of} AS item
"""

_MEMORY_NODES: LiteralString = """
MATCH (m:Memory) WHERE m.id IN $ids AND m.user_id = $user_id
RETURN m{.id, .user_id, .content, .category, .scope, .project_id, .agent_id, .hash, .metadata, .created_at,
         .updated_at, .task_id, .deleted_at} AS item
"""

# ---- helpers --------------------------------------------------------------------------------

_LUCENE_SPECIAL = frozenset('+-&|!(){}[]^"~*?:\\/')
_LUCENE_OPERATORS = frozenset({"AND", "OR", "NOT"})


def lucene_escape(term: str) -> str:
    """One user-typed term as a literal Lucene term: every query-syntax character is
    backslash-escaped (whitespace too, so it stays one clause) and the bare operators AND/OR/NOT
    are escaped so they are searched for, not applied."""
    escaped = "".join("\\" + ch if ch in _LUCENE_SPECIAL or ch.isspace() else ch for ch in term)
    return "\\" + escaped if term in _LUCENE_OPERATORS else escaped


def lucene_terms(query: str) -> list[str]:
    """The query's searchable terms, escaped: split on whitespace, terms without a letter or digit
    dropped (they analyse to nothing, and an empty required clause would match everything),
    case-insensitive duplicates dropped, at most MAX_TERMS of at most MAX_TERM_CHARS."""
    seen: set[str] = set()
    terms: list[str] = []
    for raw in query[:MAX_QUERY_CHARS].split():
        term = raw[:MAX_TERM_CHARS]
        folded = term.casefold()
        if folded in seen or not any(ch.isalnum() for ch in term):
            continue
        seen.add(folded)
        terms.append(lucene_escape(term))
        if len(terms) == MAX_TERMS:
            break
    return terms


def _lucene_query(keys: list[str], fields: tuple[str, ...], terms: list[str], live_only: bool = False) -> str:
    """`+ft_key:(k1 k2)^0 +(field:(t1 t2) ...)`: one of the caller's tenant keys is required and
    scores nothing (boost 0); the terms score as usual. `live_only` excludes documents that have
    an invalid_at or expired_at (open range = "field exists")."""
    body = " ".join(terms)
    matches = " ".join(f"{f}:({body})" for f in fields)
    live = " -invalid_at:[* TO *] -expired_at:[* TO *]" if live_only else ""
    return f"+ft_key:({' '.join(keys)})^0 +({matches}){live}"


def ft_key(user_id: str, group: str) -> str:
    """One Lucene token per (user, group): letters and digits only, so the analyzer keeps it whole."""
    return "k" + uuid.uuid5(ID_NAMESPACE, f"ft|{user_id}|{group}").hex


def iso_utc(value: str | None) -> str | None:
    """An ISO-8601 date or datetime as a UTC datetime string in the service's format
    (`datetime.isoformat()`, so ISO strings compare correctly as strings). A date is its midnight
    UTC, a naive datetime is taken as UTC. None for None or an unparseable value."""
    if not value:
        return None
    text = value.strip()[:64]
    try:
        if len(text) == 10:
            d = date.fromisoformat(text)
            return datetime(d.year, d.month, d.day, tzinfo=UTC).isoformat()
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).isoformat()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _check_id(value: str, what: str, limit: int = MAX_ID_CHARS) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise DomainError(f"{what} must be a non-empty string of at most {limit} characters")
    return value


def _check_groups(groups: list[str] | None) -> list[str] | None:
    if groups is None:
        return None
    if len(groups) > MAX_GROUPS:
        raise DomainError(f"at most {MAX_GROUPS} graph groups per read")
    return [_check_id(g, "group", MAX_GROUP_CHARS) for g in groups]


def _check_cursor(cursor: str | None) -> str:
    return "" if cursor is None else _check_id(cursor, "cursor")


def _clamp(limit: int, top: int) -> int:
    return max(1, min(int(limit), top))


def _row(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "user_id": m.user_id,
        "content": m.content,
        "category": m.category,
        "scope": m.scope.value,
        "project_id": m.project_id,
        "group_id": group_id(m.scope.value, m.project_id),
        "agent_id": m.agent_id,
        "hash": m.hash,
        "metadata": json.dumps(m.metadata, sort_keys=True),
        "created_at": m.created_at,
        "updated_at": m.updated_at,
        "task_id": m.task_id,
    }


def _name(name: str) -> str:
    return name.strip()[:MAX_NAME_CHARS]


def entity_id(user_id: str, group: str, name: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"entity|{user_id}|{group}|{_name(name).casefold()}"))


def relation_id(user_id: str, group: str, subject: str, predicate: str, obj: str) -> str:
    key = f"rel|{user_id}|{group}|{_name(subject).casefold()}|{predicate}|{_name(obj).casefold()}"
    return str(uuid.uuid5(ID_NAMESPACE, key))


def _link_rows(
    memories: list[Memory], links: list[MemoryLinks], default_valid_at: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Entity, mention and relation rows for the links. A relation's valid_at is its stated time,
    else `default_valid_at`, else the memory's acceptance time (normalised to UTC ISO)."""
    by_id = {m.id: m for m in memories}
    entities: dict[str, dict[str, Any]] = {}
    mentions: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []

    def entity(m: Memory, group: str, ref: EntityRef) -> str:
        """One row per entity id; every spelling seen in the batch becomes a name or an alias."""
        eid = entity_id(m.user_id, group, ref.name)
        name = _name(ref.name)
        row = entities.get(eid)
        if row is None:
            entities[eid] = {"id": eid, "user_id": m.user_id, "group_id": group, "name": name,
                             "name_lc": name.casefold(), "type": ref.type[:MAX_PREDICATE_CHARS], "names": [name],
                             "created_at": m.created_at, "ft_key": ft_key(m.user_id, group)}
        else:
            if row["type"] == "thing":
                row["type"] = ref.type[:MAX_PREDICATE_CHARS]
            if name not in row["names"]:
                row["names"].append(name)
        return eid

    for link in links:
        m = by_id[link.memory_id]
        group = group_id(m.scope.value, m.project_id)
        for ref in link.entities:
            if _name(ref.name):
                mentions.append({"memory_id": m.id, "entity_id": entity(m, group, ref)})
        known = {_name(e.name).casefold(): e.type for e in link.entities}
        for rel in link.relations:
            if not _name(rel.subject) or not _name(rel.object) or not rel.predicate.strip():
                continue
            predicate = rel.predicate.strip()[:MAX_PREDICATE_CHARS]
            src = entity(m, group, EntityRef(rel.subject, known.get(_name(rel.subject).casefold(), "thing")))
            dst = entity(m, group, EntityRef(rel.object, known.get(_name(rel.object).casefold(), "thing")))
            mentions += [{"memory_id": m.id, "entity_id": src}, {"memory_id": m.id, "entity_id": dst}]
            valid_at = iso_utc(rel.valid_at) or iso_utc(default_valid_at) or iso_utc(m.created_at) or m.created_at
            relations.append({
                "id": relation_id(m.user_id, group, rel.subject, predicate, rel.object),
                "source_id": src, "target_id": dst, "user_id": m.user_id, "group_id": group,
                "predicate": predicate, "fact": rel.fact[:MAX_FACT_CHARS], "valid_at": valid_at,
                "created_at": m.created_at, "memory_id": m.id, "updated_at": m.updated_at,
                "ft_key": ft_key(m.user_id, group),
            })
    # Sorted by id: concurrent writers (other processes) take the nodes' locks in one global order.
    unique_mentions = sorted({(r["entity_id"], r["memory_id"]): r for r in mentions}.values(),
                             key=lambda r: (r["entity_id"], r["memory_id"]))
    return {
        "entities": sorted(entities.values(), key=lambda r: str(r["id"])),
        "mentions": unique_mentions,
        "relations": sorted(relations, key=lambda r: (min(r["source_id"], r["target_id"]), r["id"], r["memory_id"])),
    }


def group_id(scope: str, project_id: str | None) -> str:
    """Seed 001's namespace: "global" or "project--<id>"."""
    return "global" if scope == "global" or not project_id else f"project--{project_id}"


async def _apply_links(tx: AsyncManagedTransaction, graph: dict[str, list[dict[str, Any]]], now: str) -> None:
    """MERGE entities, mentions and relations, then let single-valued facts replace older ones."""
    if graph["entities"]:
        await (await tx.run(_UPSERT_ENTITIES, rows=graph["entities"], max_aliases=MAX_ALIASES)).consume()
    if graph["mentions"]:
        await (await tx.run(_UPSERT_MENTIONS, rows=graph["mentions"])).consume()
    if graph["relations"]:
        await (await tx.run(_UPSERT_RELATIONS, rows=graph["relations"])).consume()
    single = sorted(
        (r for r in graph["relations"] if r["predicate"] in SINGLE_VALUED_PREDICATES),
        key=lambda r: str(r["valid_at"]),
    )
    for rel in single:  # one at a time, oldest first: each sees the previous one's writes
        params = {"source_id": rel["source_id"], "id": rel["id"], "now": now}
        await (await tx.run(_SUPERSEDE_NEW, **params)).consume()
        await (await tx.run(_SUPERSEDE_OLD, **params)).consume()


def _fact(row: dict[str, Any], score: float = 0.0) -> GraphFact:
    return GraphFact(
        id=str(row["id"]), fact=str(row.get("fact") or ""), predicate=str(row.get("predicate") or ""),
        source=str(row.get("source") or ""), target=str(row.get("target") or ""),
        group_id=str(row.get("group_id") or "global"), valid_at=row.get("valid_at"),
        invalid_at=row.get("invalid_at"), expired_at=row.get("expired_at"),
        memory_ids=list(row.get("memory_ids") or []), created_at=row.get("created_at"), score=score,
    )


def _edge_item(row: dict[str, Any]) -> dict[str, object]:
    item: dict[str, object] = dict(_fact(row).__dict__)
    item["source_id"] = row.get("source_id")
    item["target_id"] = row.get("target_id")
    return item


def _recency(valid_at: str | None, now: datetime) -> float:
    stamp = iso_utc(valid_at)
    if stamp is None:
        return 0.5
    age_days = max(0.0, (now - datetime.fromisoformat(stamp)).total_seconds() / 86400)
    return float(0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS))


def fact_score(evidence: list[float], support: int, valid_at: str | None, now: datetime) -> float:
    """Relevance in [0, 1]. `evidence` are the edge's match strengths in [0, 1] (entity or fact
    full-text normalised by the best in the result, one-hop ones weighted down), combined as a
    probabilistic OR; support (number of memories) and recency then scale it within [0.7, 1].
    So an edge of a matched entity always ranks above a neighbour's edge reached through it."""
    miss = 1.0
    for e in evidence:
        miss *= 1.0 - min(1.0, max(0.0, e))
    relevance = 1.0 - miss
    support_part = 1.0 - 0.5 ** max(0, support)
    score = relevance * (0.7 + 0.2 * support_part + 0.1 * _recency(valid_at, now))
    return round(min(1.0, max(0.0, score)), 6)


class Neo4jGraphStore:
    name = "neo4j"

    def __init__(self, uri: str, user: str, password: str | None, database: str, timeout: float) -> None:
        auth = (user, password) if password else None
        self._driver: AsyncDriver = AsyncGraphDatabase.driver(
            uri,
            auth=auth,
            connection_timeout=timeout,
            connection_acquisition_timeout=timeout,
            max_transaction_retry_time=timeout,
        )
        self._db = database
        self._timeout = timeout
        self.transient_retries = 0  # transaction functions the driver re-ran on a transient error
        self.deadlock_retries = 0  # ... of which on DeadlockDetected

    async def _write(self, fn: Any, **params: Any) -> Any:
        async def counted(tx: AsyncManagedTransaction, /, **kw: Any) -> Any:
            try:
                return await fn(tx, **kw)
            except TransientError as exc:  # the driver retries the function; we count why
                self.transient_retries += 1
                if "Deadlock" in (exc.code or ""):
                    self.deadlock_retries += 1
                raise

        try:
            async with asyncio.timeout(self._timeout * 6):
                async with self._driver.session(database=self._db) as session:
                    return await session.execute_write(counted, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            if "MemoryPoolOutOfMemoryError" in (exc.code or ""):
                raise  # remove_memories halves its batch on this one
            raise DependencyUnavailable(f"neo4j transient error after the driver's retries: {exc.code}") from exc

    async def _read(self, fn: Any, **params: Any) -> Any:
        try:
            async with asyncio.timeout(self._timeout):
                async with self._driver.session(database=self._db) as session:
                    return await session.execute_read(fn, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            raise DependencyUnavailable(f"neo4j transient error after the driver's retries: {exc.code}") from exc

    async def ensure_schema(self) -> None:
        async def run(tx: AsyncManagedTransaction, stmt: LiteralString) -> None:
            await (await tx.run(stmt)).consume()

        for stmt in SCHEMA:
            try:
                await self._write(run, stmt=stmt)
            except Neo4jError as exc:  # an equivalent index under another name is fine
                if "EquivalentSchemaRule" not in (exc.code or ""):
                    raise
        await self._backfill()

        async def wait(tx: AsyncManagedTransaction, seconds: int) -> None:
            await (await tx.run("CALL db.awaitIndexes($seconds)", seconds=seconds)).consume()

        # full-text indexes populate asynchronously; reads right after start need them online
        try:
            await self._write(wait, seconds=int(self._timeout * 5))
        except Neo4jError as exc:  # a big store may take longer: searches fail until it is online
            log.warning("graph_indexes_not_online_yet", error=str(exc))
        log.info("graph_schema_ready", statements=len(SCHEMA))

    async def _backfill(self) -> None:
        """Entities and edges written before `ft_key` existed get it, memories before `edge_ids`
        existed get theirs (no-op once done)."""
        select: tuple[tuple[LiteralString, LiteralString], ...] = (
            ("MATCH (e:Entity) WHERE e.ft_key IS NULL "
             "RETURN e.id AS id, coalesce(e.user_id, '') AS user_id, coalesce(e.group_id, '') AS group_id LIMIT 5000",
             "UNWIND $rows AS row MATCH (e:Entity {id: row.id}) SET e.ft_key = row.key"),
            ("MATCH ()-[r:RELATES]->() WHERE r.ft_key IS NULL "
             "RETURN r.id AS id, coalesce(r.user_id, '') AS user_id, coalesce(r.group_id, '') AS group_id LIMIT 5000",
             "UNWIND $rows AS row MATCH ()-[r:RELATES {id: row.id}]->() WHERE r.ft_key IS NULL SET r.ft_key = row.key"),
        )

        async def batch(tx: AsyncManagedTransaction, find: LiteralString, fill: LiteralString) -> int:
            rows = await (await tx.run(find)).data()
            keyed = [{"id": r["id"], "key": ft_key(r["user_id"], r["group_id"])} for r in rows]
            if keyed:
                await (await tx.run(fill, rows=keyed)).consume()
            return len(keyed)

        for find, fill in select:
            for _ in range(10_000):
                if await self._write(batch, find=find, fill=fill) == 0:
                    break

        async def legacy_users(tx: AsyncManagedTransaction) -> list[str | None]:
            return [r["user_id"] for r in await (await tx.run(_LEGACY_MEMORY_USERS)).data()]

        async def edge_ids(tx: AsyncManagedTransaction, user_id: str | None) -> None:
            await (await tx.run(_BACKFILL_EDGE_IDS, user_id=user_id)).consume()

        for _ in range(10_000):
            users: list[str | None] = await self._write(legacy_users)
            if not users:
                break
            for u in users:
                if u is None:  # no user: nothing can reference it; mark it done
                    await self._write(self._mark_orphans)
                else:
                    await self._write(edge_ids, user_id=u)

    @staticmethod
    async def _mark_orphans(tx: AsyncManagedTransaction) -> None:
        await (await tx.run("MATCH (m:Memory) WHERE m.user_id IS NULL AND m.edge_ids IS NULL "
                            "SET m.edge_ids = []")).consume()

    # ---- writes ---------------------------------------------------------------------------

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None) -> None:
        graph = _link_rows(memories, links or [])
        now = _now()

        async def run(tx: AsyncManagedTransaction, rows: list[dict[str, Any]]) -> None:
            await (await tx.run(_UPSERT_MEMORIES, rows=rows)).consume()
            await _apply_links(tx, graph, now)

        await self._write(run, rows=sorted((_row(m) for m in memories), key=lambda r: str(r["id"])))

    async def replace_memory(self, memory: Memory, links: MemoryLinks, now: str) -> list[str]:
        if links.memory_id != memory.id:
            raise DomainError("links belong to another memory")
        now = iso_utc(now) or _now()
        graph = _link_rows([memory], [links], default_valid_at=now)
        keep = sorted({r["id"] for r in graph["relations"]})
        keys = sorted({(r["source_id"], r["predicate"]) for r in graph["relations"]
                       if r["predicate"] in SINGLE_VALUED_PREDICATES})

        async def run(tx: AsyncManagedTransaction) -> list[str]:
            await (await tx.run(_UPSERT_MEMORIES, rows=[_row(memory)])).consume()
            await (await tx.run(_DROP_SUPPORT, memory_ids=[memory.id], memory_id=memory.id, keep=keep,
                                now=now)).consume()
            await _apply_links(tx, graph, now)
            result = await tx.run(_INVALIDATED_BY, memory_ids=[memory.id], memory_id=memory.id, now=now,
                                  keys=[list(k) for k in keys])
            return [str(r["id"]) for r in await result.data()]

        invalidated: list[str] = await self._write(run)
        return invalidated

    async def remove_memories(
        self, memory_ids: list[str], now: str, duplicate_of: dict[str, str] | None = None, *,
        user_id: str | None = None, erase: bool = False,
    ) -> list[str]:
        now = iso_utc(now) or _now()
        ids = list(dict.fromkeys(_check_id(i, "memory id") for i in memory_ids))
        dups = {_check_id(k, "memory id"): _check_id(v, "memory id") for k, v in (duplicate_of or {}).items()}

        async def run(tx: AsyncManagedTransaction, chunk: list[str]) -> list[str]:
            rows = [{"id": i, "duplicate_of": dups.get(i), "user_id": user_id} for i in chunk]
            chunk_dups = {i: dups[i] for i in chunk if i in dups}
            await (await tx.run(_MARK_REMOVED, rows=rows, now=now)).consume()
            await (await tx.run(_DROP_REMOVED, memory_ids=chunk, dups=chunk_dups, now=now)).consume()
            if chunk_dups:
                await (await tx.run(_ADOPT_EDGES, dups=chunk_dups)).consume()
            result = await tx.run(_EXPIRED_BY, memory_ids=chunk, now=now)
            expired = [str(r["id"]) for r in await result.data()]
            if erase:
                await (await tx.run(_ERASE_FACTS, memory_ids=chunk)).consume()
                await (await tx.run(_ERASE_REMOVED, memory_ids=chunk)).consume()
            return expired

        async def remove(chunk: list[str]) -> list[str]:
            try:
                done: list[str] = await self._write(run, chunk=chunk)
                return done
            except TransientError as exc:  # too many edges for one transaction: halve (idempotent)
                if "MemoryPoolOutOfMemoryError" not in (exc.code or "") or len(chunk) == 1:
                    raise
                half = len(chunk) // 2
                return await remove(chunk[:half]) + await remove(chunk[half:])

        expired: list[str] = []
        for start in range(0, len(ids), REMOVE_BATCH):
            expired += await remove(ids[start : start + REMOVE_BATCH])
        return sorted(set(expired))

    # ---- reads ----------------------------------------------------------------------------

    async def search_facts(
        self, user_id: str, groups: list[str], query: str, limit: int, include_history: bool = False
    ) -> list[GraphFact]:
        _check_id(user_id, "user_id")
        checked = _check_groups(groups) or []
        limit = _clamp(limit, MAX_SEARCH_LIMIT)
        if not checked:
            return []
        terms = lucene_terms(query)
        name_lc = query[:MAX_QUERY_CHARS].strip().casefold()[:MAX_NAME_CHARS]
        keys = [ft_key(user_id, g) for g in checked]
        entity_q = _lucene_query(keys, ("name", "aliases"), terms) if terms else None
        fact_q = _lucene_query(keys, ("fact",), terms, live_only=not include_history) if terms else None
        common: dict[str, Any] = {"user_id": user_id, "groups": checked, "history": include_history}

        async def run(tx: AsyncManagedTransaction) -> tuple[dict[str, float], list[dict[str, Any]],
                                                             list[dict[str, Any]]]:
            hits: dict[str, float] = {}
            if entity_q:
                result = await tx.run(_ENTITY_TEXT_HITS, index=ENTITY_TEXT_INDEX, lucene=entity_q,
                                      k=ENTITY_HITS, **common)
                raw = {str(r["id"]): float(r["score"]) for r in await result.data()}
                top = max(raw.values(), default=0.0)
                hits = {k: v / top for k, v in raw.items()} if top > 0 else {}
            if name_lc:
                for r in await (await tx.run(_ENTITY_EXACT_HITS, name_lc=name_lc, **common)).data():
                    hits[str(r["id"])] = 1.0
            best = sorted(hits, key=lambda h: (-hits[h], h))[:ENTITY_HITS]
            hits = {h: hits[h] for h in best}
            edges: list[dict[str, Any]] = []
            if hits:
                result = await tx.run(_ENTITY_EDGES, hits=best, direct=DIRECT_EDGES, neighbours=NEIGHBOURS,
                                      per_neighbour=NEIGHBOUR_EDGES, hub=HUB_DEGREE, **common)
                edges = await result.data()
            facts: list[dict[str, Any]] = []
            if fact_q:
                result = await tx.run(_FACT_TEXT_HITS, index=FACT_TEXT_INDEX, lucene=fact_q,
                                      k=max(2 * limit, 20), **common)
                facts = await result.data()
            return hits, edges, facts

        hits, edges, facts = await self._read(run)
        evidence: dict[str, dict[tuple[str, int], float]] = {}
        rows: dict[str, dict[str, Any]] = {}
        for e in edges:
            fact = e["fact"]
            weight = hits.get(str(e["hit"]), 0.0) * (1.0 if e["hop"] == 0 else ONE_HOP_WEIGHT)
            slot = evidence.setdefault(str(fact["id"]), {})
            key = ("entity:" + str(e["hit"]), 0)
            slot[key] = max(slot.get(key, 0.0), weight)
            rows[str(fact["id"])] = fact
        top_fact = max((float(f["score"]) for f in facts), default=0.0)
        for f in facts:
            fact = f["fact"]
            slot = evidence.setdefault(str(fact["id"]), {})
            slot[("fact", 0)] = float(f["score"]) / top_fact if top_fact > 0 else 0.0
            rows[str(fact["id"])] = fact
        now = datetime.now(UTC)
        scored = [
            _fact(row, fact_score(list(evidence[fid].values()), len(row.get("memory_ids") or []),
                                  row.get("valid_at"), now))
            for fid, row in rows.items()
        ]
        scored.sort(key=lambda f: (-f.score, f.id))
        return [f for f in scored if f.score > 0][:limit]

    async def _page(
        self, stmt: LiteralString, user_id: str, groups: list[str] | None, limit: int, cursor: str | None,
        history: bool = False,
    ) -> list[dict[str, Any]]:
        _check_id(user_id, "user_id")
        params: dict[str, Any] = {
            "user_id": user_id, "groups": _check_groups(groups), "cursor": _check_cursor(cursor),
            "limit": _clamp(limit, MAX_PAGE_LIMIT) + 1, "history": history,
        }

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            return list(await (await tx.run(stmt, **params)).data())

        rows: list[dict[str, Any]] = await self._read(run)
        return rows

    @staticmethod
    def _paged(items: list[dict[str, object]], limit: int) -> Page:
        limit = _clamp(limit, MAX_PAGE_LIMIT)
        more = len(items) > limit
        items = items[:limit]
        return Page(items=items, next_cursor=str(items[-1]["id"]) if more and items else None)

    async def list_nodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> Page:
        rows = await self._page(_LIST_NODES, user_id, groups, limit, cursor)
        return self._paged([dict(r["item"]) for r in rows], limit)

    async def list_edges(
        self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None, include_history: bool = False
    ) -> Page:
        rows = await self._page(_LIST_EDGES, user_id, groups, limit, cursor, include_history)
        return self._paged([_edge_item(r["fact"]) for r in rows], limit)

    async def list_episodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> Page:
        rows = await self._page(_LIST_EPISODES, user_id, groups, limit, cursor)
        return self._paged([dict(r["item"]) for r in rows], limit)

    async def entities(self, user_id: str) -> list[dict[str, object]]:
        async def run(tx: AsyncManagedTransaction, user_id: str) -> list[dict[str, object]]:
            result = await tx.run(
                "MATCH (e:Entity {user_id: $user_id}) "
                "RETURN e.id AS id, e.name AS name, e.type AS type, e.aliases AS aliases, e.group_id AS group_id "
                "ORDER BY e.name",
                user_id=user_id,
            )
            return [dict(r) for r in await result.data()]

        rows: list[dict[str, object]] = await self._read(run, user_id=user_id)
        return rows

    async def relations(self, user_id: str) -> list[dict[str, object]]:
        """Every edge, history included (invalid and expired ones too)."""

        async def run(tx: AsyncManagedTransaction, user_id: str) -> list[dict[str, object]]:
            result = await tx.run(
                "MATCH (s:Entity)-[r:RELATES {user_id: $user_id}]->(o:Entity) "
                "RETURN r.id AS id, s.name AS source, r.predicate AS predicate, o.name AS target, "
                "r.fact AS fact, r.valid_at AS valid_at, r.invalid_at AS invalid_at, "
                "r.expired_at AS expired_at, r.memory_ids AS memory_ids, r.group_id AS group_id "
                "ORDER BY source, predicate, target",
                user_id=user_id,
            )
            return [dict(r) for r in await result.data()]

        rows: list[dict[str, object]] = await self._read(run, user_id=user_id)
        return rows

    async def memory_nodes(self, user_id: str, memory_ids: list[str]) -> list[dict[str, Any]]:
        """The user's (:Memory) nodes with these ids (deleted ones too, with `deleted_at`)."""
        _check_id(user_id, "user_id")
        ids = [_check_id(i, "memory id") for i in memory_ids]

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(_MEMORY_NODES, user_id=user_id, ids=ids)
            return [dict(r["item"]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._read(run)
        return rows

    async def memory_users(self, limit: int = 100_000) -> list[str]:
        async def run(tx: AsyncManagedTransaction) -> list[str]:
            result = await tx.run("MATCH (m:Memory) WHERE m.user_id IS NOT NULL "
                                  "RETURN DISTINCT m.user_id AS user_id LIMIT $limit", limit=limit)
            return [str(r["user_id"]) for r in await result.data()]

        users: list[str] = await self._read(run)
        return users

    async def count_memories(self, user_id: str) -> int:
        """Live memories only (deleted and deduplicated ones are history)."""

        async def run(tx: AsyncManagedTransaction, user_id: str) -> int:
            rec = await (await tx.run(
                "MATCH (m:Memory {user_id: $user_id}) WHERE m.deleted_at IS NULL RETURN count(m) AS n",
                user_id=user_id,
            )).single()
            return int(rec["n"]) if rec else 0

        return int(await self._read(run, user_id=user_id))

    async def ping(self) -> None:
        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run("RETURN 1")).consume()

        await self._read(run)

    async def close(self) -> None:
        await self._driver.close()
