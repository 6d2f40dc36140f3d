"""Every Cypher statement of the Neo4j graph store, and the schema (constraints and indexes).

Temporal model of a RELATES edge: `valid_at` is when the fact became true, `invalid_at` when it stopped
being true (a newer single-valued fact, or an update that no longer states it), and `expired_at` when the
graph stopped treating it as current (invalidation or loss of every supporting memory). Superseded facts
stay as history; a user's delete erases."""

from __future__ import annotations

from typing import LiteralString

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
    # Flat write cost: a relation is found by its unique key (the id of the original edge; a merge's
    # copies share the id but have no key), the live edges of one (subject, predicate) by `slot`, which only
    # live edges carry, and what one call expired by `expired_at`; never by walking a node's relationships.
    # Relationship property uniqueness constraints exist in Community since 5.7.
    "CREATE CONSTRAINT relates_key IF NOT EXISTS FOR ()-[r:RELATES]-() REQUIRE r.key IS UNIQUE",
    "CREATE INDEX relates_slot IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.slot)",
    "CREATE INDEX relates_expired IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.expired_at)",
    "CREATE INDEX relates_user IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.user_id)",
    # cursor pagination: equality on the user, range + order on the id
    "CREATE INDEX memory_user_id IF NOT EXISTS FOR (m:Memory) ON (m.user_id, m.id)",
    "CREATE INDEX entity_user_id IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.id)",
    "CREATE INDEX relates_user_id IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.user_id, r.id)",
    # entity curation and traces (curation.py)
    "CREATE INDEX entity_merged IF NOT EXISTS FOR (e:Entity) ON (e.merged_into)",
    "CREATE INDEX entity_merged_via IF NOT EXISTS FOR (e:Entity) ON (e.merged_via)",
    # an unmerge finds a merge's copies by these (only copies carry the property), not by walking the target
    "CREATE INDEX mentions_live IF NOT EXISTS FOR ()-[r:MENTIONS]-() ON (r.live_of)",
    "CREATE INDEX relates_migrated IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.migrated_from)",
    "CREATE INDEX mentions_migrated IF NOT EXISTS FOR ()-[r:MENTIONS]-() ON (r.migrated_from)",
    "CREATE INDEX same_as_migrated IF NOT EXISTS FOR ()-[r:SAME_AS]-() ON (r.migrated_from)",
    "CREATE INDEX touched_migrated IF NOT EXISTS FOR ()-[r:TOUCHED]-() ON (r.migrated_from)",
    "CREATE CONSTRAINT trace_id IF NOT EXISTS FOR (t:Trace) REQUIRE t.id IS UNIQUE",
    "CREATE INDEX trace_user IF NOT EXISTS FOR (t:Trace) ON (t.user_id, t.at)",
    "CREATE INDEX trace_expiry IF NOT EXISTS FOR (t:Trace) ON (t.expires_at)",
    # full-text (Lucene, analyzer standard-no-stop-words); 5.26 indexes LIST<STRING> (aliases) too.
    # invalid_at/expired_at are in the edge index only so a query can exclude history inside
    # Lucene (`-expired_at:[* TO *]`), before the index applies its limit.
    "CREATE FULLTEXT INDEX entity_text IF NOT EXISTS FOR (e:Entity) ON EACH [e.name, e.aliases, e.ft_key]",
    "CREATE FULLTEXT INDEX relates_text IF NOT EXISTS FOR ()-[r:RELATES]-() "
    "ON EACH [r.fact, r.ft_key, r.invalid_at, r.expired_at]",
)


# ---- writes ---------------------------------------------------------------------------------

# A stale replay (older updated_at than the node) does not roll content back. `edge_ids` lists
# every edge the memory has ever supported (history included): lifecycle operations find the
# edges to touch through it (index seeks) instead of scanning all of the user's edges.
UPSERT_MEMORIES: LiteralString = """
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
ON CREATE SET m.edge_ids = []
WITH m, row
WHERE m.deleted_at IS NULL AND (m.updated_at IS NULL OR m.updated_at <= row.updated_at)
SET m += row
"""

# A new entity carries the resolution gate's decision (service/identity.py); `keys` (every name's and alias's
# normalised key) is what the gate finds it by; `name_vec_<dim>` is the embedding of its name.
UPSERT_ENTITIES: LiteralString = """
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
ON CREATE SET e.user_id = row.user_id, e.group_id = row.group_id, e.name = row.name,
              e.name_lc = row.name_lc, e.type = row.type, e.aliases = [], e.created_at = row.created_at,
              e.resolution_action = row.resolution_action, e.resolution_score = row.resolution_score,
              e.resolution_match_type = row.resolution_match_type, e.resolution_reason = row.resolution_reason,
              e.resolution_target = row.resolution_target, e.resolved_at = row.resolved_at
SET e.ft_key = row.ft_key,
    e.type = CASE WHEN e.type = 'thing' THEN row.type ELSE e.type END,
    e.aliases = reduce(acc = e.aliases, n IN row.names |
                       CASE WHEN n = e.name OR n IN acc OR size(acc) >= $max_aliases THEN acc ELSE acc + n END),
    e.keys = reduce(acc = coalesce(e.keys, []), k IN row.keys | CASE WHEN k IN acc THEN acc ELSE acc + k END)
WITH e, row WHERE row.vector IS NOT NULL AND coalesce(e.name_vector_model, '') <> row.vector_model
SET e += row.vector_props, e.name_vector_model = row.vector_model
"""

# `live_of` (the entity's id, indexed) marks the mention of a live memory: an erase asks "does a live memory still
# mention e?" with one index seek instead of walking e's mentions past the removed ones (MARK_REMOVED clears it).
UPSERT_MENTIONS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.memory_id})
MATCH (e:Entity {id: row.entity_id})
MERGE (m)-[x:MENTIONS]->(e)
SET x.live_of = CASE WHEN m.deleted_at IS NULL THEN e.id END
"""

# A deleted memory, or a stale replay of an updated one, supports nothing.
# An invalidated edge stated again *after* it stopped being true lives again from the new
# valid_at; an edge that only lacked support (expired, not invalid) lives again with support.
# The MERGE is on `key` (unique): a seek of the constraint's index, then LOCK(s, o) and the seek again; its cost
# does not depend on how many relationships s or o have (a MERGE on `id` walked them, or scanned the whole
# id index). A live edge carries `slot` (`<source id>|<predicate>`), history does not.
UPSERT_RELATIONS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.memory_id})
WHERE m.deleted_at IS NULL AND coalesce(m.updated_at, '') <= row.updated_at
MATCH (s:Entity {id: row.source_id})
MATCH (o:Entity {id: row.target_id})
MERGE (s)-[r:RELATES {key: row.id}]->(o)
ON CREATE SET r.id = row.id, r.user_id = row.user_id, r.group_id = row.group_id, r.predicate = row.predicate,
              r.valid_at = row.valid_at, r.invalid_at = null, r.expired_at = null,
              r.memory_ids = [], r.former_memory_ids = [], r.created_at = row.created_at
SET r.fact = row.fact, r.ft_key = row.ft_key,
    r.memory_ids = CASE WHEN row.memory_id IN r.memory_ids THEN r.memory_ids ELSE r.memory_ids + row.memory_id END,
    m.edge_ids = CASE WHEN row.id IN coalesce(m.edge_ids, []) THEN m.edge_ids
                      ELSE coalesce(m.edge_ids, []) + row.id END
WITH s, r, row,
     (r.invalid_at IS NOT NULL AND row.valid_at > r.invalid_at) AS restated,
     (r.invalid_at IS NULL AND r.expired_at IS NOT NULL) AS resupported
SET r.valid_at = CASE WHEN restated THEN row.valid_at ELSE r.valid_at END,
    r.invalid_at = CASE WHEN restated THEN null ELSE r.invalid_at END,
    r.expired_at = CASE WHEN restated OR resupported THEN null ELSE r.expired_at END
WITH s, r WHERE r.invalid_at IS NULL AND r.expired_at IS NULL
SET r.slot = s.id + '|' + r.predicate
"""

# Single-valued predicates: the new edges of a write, in valid_at order, each seeing the previous one's writes
# (a CALL subquery runs once per row, in order, and sees the earlier runs' changes), in one round trip.
# For each new edge: a valid edge of the same subject and predicate that is strictly newer makes it history;
# otherwise it replaces every valid edge of that subject and predicate that is not newer.
# The new edge by its key, the others by `slot` (index seeks: only the slot's live edges are read, not the
# subject's relationships nor the slot's history). An edge made history loses its slot.
SUPERSEDE: LiteralString = """
UNWIND $rows AS row
CALL (row) {
    MATCH ()-[n:RELATES {key: row.id}]->()
    WHERE n.invalid_at IS NULL AND n.expired_at IS NULL
    OPTIONAL MATCH ()-[o:RELATES {slot: row.slot}]->()
    WHERE o.id <> n.id AND o.invalid_at IS NULL AND o.expired_at IS NULL AND o.valid_at > n.valid_at
    WITH n, min(o.valid_at) AS next
    SET n.invalid_at = coalesce(next, n.invalid_at),
        n.expired_at = CASE WHEN next IS NULL THEN n.expired_at ELSE $now END,
        n.slot = CASE WHEN next IS NULL THEN n.slot ELSE null END
    WITH n WHERE n.invalid_at IS NULL
    MATCH ()-[o:RELATES {slot: row.slot}]->()
    WHERE o.id <> n.id AND o.invalid_at IS NULL AND o.expired_at IS NULL AND o.valid_at <= n.valid_at
    SET o.invalid_at = n.valid_at, o.expired_at = $now, o.slot = null
}
"""

# The edges a memory ever supported (index seeks through Memory.edge_ids).
EDGES_OF: LiteralString = """
MATCH (m:Memory) WHERE m.id IN $memory_ids
UNWIND coalesce(m.edge_ids, []) AS eid
WITH DISTINCT eid
MATCH ()-[r:RELATES {id: eid}]->()
"""

# Update: edges the memory supported that its new links do not restate lose it; those left
# without a live supporter become invalid (the memory no longer says so).
DROP_SUPPORT: LiteralString = EDGES_OF + """
WITH r WHERE $memory_id IN r.memory_ids AND NOT r.id IN $keep
WITH r, [x IN r.memory_ids WHERE x <> $memory_id] AS rest, coalesce(r.former_memory_ids, []) AS former
SET r.memory_ids = rest,
    r.former_memory_ids = CASE WHEN $memory_id IN former THEN former ELSE former + $memory_id END
WITH r, rest
WHERE r.invalid_at IS NULL
  AND NOT any(x IN rest WHERE EXISTS { MATCH (lm:Memory {id: x}) WHERE lm.deleted_at IS NULL })
SET r.invalid_at = $now, r.expired_at = coalesce(r.expired_at, $now), r.slot = null
"""

# What a replace_memory call (identified by its `now`) invalidated: edges it took the memory's
# support from, and edges of the subjects/predicates it stated single-valued facts for.
# The same answer on a retry.
INVALIDATED_BY: LiteralString = """
CALL () {
""" + EDGES_OF + """
    WITH r WHERE NOT $memory_id IN r.memory_ids AND r.invalid_at IS NOT NULL AND r.expired_at = $now
    RETURN r.id AS id
  UNION
    MATCH ()-[r:RELATES]->() WHERE r.expired_at = $now  // index seek: the edges this call expired
    WITH r WHERE r.invalid_at IS NOT NULL AND [startNode(r).id, r.predicate] IN $keys
    RETURN r.id AS id
}
RETURN id ORDER BY id
"""

# MERGE, not MATCH: a delete that reaches the graph before the memory's own graph write leaves a
# tombstone, so the late write cannot bring the memory back (its relations check deleted_at).
MARK_REMOVED: LiteralString = """
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
ON CREATE SET m.user_id = row.user_id, m.edge_ids = []
SET m.deleted_at = coalesce(m.deleted_at, $now),
    m.duplicate_of = coalesce(m.duplicate_of, row.duplicate_of)
WITH m
CALL (m) {  // its mentions no longer keep an entity alive (the memory's own few relationships)
    MATCH (m)-[x:MENTIONS]->()
    SET x.live_of = null
}
"""

# A delete erases: the removed nodes keep ids and times only; edges no memory states any more
# lose their text; entities no live memory mentions go, with their edges.
# A live mention is found by `live_of` (an index seek, whatever e's degree; the hint: on a store with few marked
# mentions the planner would scan the index); only an entity without one is walked, for mentions written before
# `live_of` existed: that walk reads e's mentions, as its DETACH DELETE then does.
ERASE_REMOVED: LiteralString = """
MATCH (m:Memory) WHERE m.id IN $memory_ids
SET m.content = null, m.metadata = null, m.hash = null
WITH collect(m) AS gone
UNWIND gone AS m
OPTIONAL MATCH (m)-[:MENTIONS]->(e:Entity)
WITH DISTINCT e WHERE e IS NOT NULL
WITH e WHERE NOT EXISTS { MATCH ()-[x:MENTIONS {live_of: e.id}]->() USING INDEX SEEK x:MENTIONS(live_of) }
WITH e WHERE NOT EXISTS { MATCH (live:Memory)-[:MENTIONS]->(e) WHERE live.deleted_at IS NULL }
DETACH DELETE e
"""

ERASE_FACTS: LiteralString = EDGES_OF + """
WITH r WHERE size(r.memory_ids) = 0
SET r.fact = null
"""

# Removed memories (deleted or duplicates) stop supporting their edges. Edges left without
# support expire (they are not known to be false: invalid_at stays). A duplicate's survivor is
# not added to edges it did not support itself (those edges expire).
DROP_REMOVED: LiteralString = EDGES_OF + """
WITH r WHERE any(x IN r.memory_ids WHERE x IN $memory_ids)
WITH r, [x IN r.memory_ids WHERE NOT x IN $memory_ids] AS supporters,
     [x IN r.memory_ids WHERE x IN $memory_ids] AS gone
SET r.memory_ids = supporters,
    r.former_memory_ids = reduce(acc = coalesce(r.former_memory_ids, []), x IN gone |
                                 CASE WHEN x IN acc THEN acc ELSE acc + x END)
WITH r
WHERE size(r.memory_ids) = 0 AND r.expired_at IS NULL
SET r.expired_at = $now, r.slot = null
"""

# A survivor takes over its duplicates' edges in its own edge_ids.
ADOPT_EDGES: LiteralString = """
UNWIND keys($dups) AS dup
MATCH (d:Memory {id: dup})
MATCH (sv:Memory {id: $dups[dup]})
UNWIND coalesce(d.edge_ids, []) AS eid
MATCH ()-[r:RELATES {id: eid}]->()
WHERE sv.id IN r.memory_ids
WITH sv, collect(DISTINCT eid) AS eids
SET sv.edge_ids = coalesce(sv.edge_ids, []) + [e IN eids WHERE NOT e IN coalesce(sv.edge_ids, [])]
"""

EXPIRED_BY: LiteralString = EDGES_OF + """
WITH r WHERE r.expired_at = $now AND size(r.memory_ids) = 0
RETURN r.id AS id ORDER BY id
"""

LEGACY_MEMORY_USERS: LiteralString = """
MATCH (m:Memory) WHERE m.edge_ids IS NULL
RETURN DISTINCT m.user_id AS user_id LIMIT 100
"""

# One pass over the user's edges (index on RELATES.user_id), grouped by supporting memory.
BACKFILL_EDGE_IDS: LiteralString = """
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

FACT_FIELDS: LiteralString = """
r{.id, .fact, .predicate, .group_id, .valid_at, .invalid_at, .expired_at, .memory_ids, .created_at,
  source: startNode(r).name, target: endNode(r).name,
  source_id: startNode(r).id, target_id: endNode(r).id} AS fact
"""

ENTITY_TEXT_HITS: LiteralString = """
CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $k}) YIELD node, score
WHERE score > 0 AND node.user_id = $user_id AND node.group_id IN $groups
RETURN coalesce(node.merged_into, node.id) AS id, score
"""

ENTITY_EXACT_HITS: LiteralString = """
MATCH (e:Entity {user_id: $user_id, name_lc: $name_lc})
WHERE e.group_id IN $groups
RETURN coalesce(e.merged_into, e.id) AS id
"""

ENTITY_EDGES: LiteralString = """
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
    WHERE o <> e AND o.merged_into IS NULL AND ($history OR (r0.invalid_at IS NULL AND r0.expired_at IS NULL))
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
RETURN hit, hop, """ + FACT_FIELDS

# The graph retriever, in one statement (one round trip; only the ranked memories cross the wire):
# 1. the entities the query names: full text over names and aliases (scores normalised by the best) and an exact
#    match of the whole query (1.0); the best $entity_hits; an entity merged into another (its
#    `merged_into`, absent on older nodes) counts as its target, and is never followed as a neighbour;
# 2. memories that mention a matched entity (hop 0) or an entity one valid RELATES edge away from it (hop 1).
#    Mention counts are degree lookups (no label on the far end); an entity mentioned more than $max_mentions
#    times is a hub whose memories are not read (it says little about any of them), and every read is LIMITed;
# 3. a memory's score: for each (matched entity, memory, hop) that reaches it, the entity's match strength,
#    times $one_hop for a neighbour's memory, over log2(1 + the mentions of the entity the memory mentions), so
#    a rare entity counts more than one the user mentions everywhere (an IDF). Best first, ties by id.
# One row: the matched entities' names and aliases (the caller ranks the memories by the rest of the query),
# the memory ids and their scores; no row when no memory was reached.
# Two variants: with the full-text part (the query has Lucene terms) and without (exact name only).
_RETRIEVER_TEXT: LiteralString = """
CALL () {
    CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $entity_hits}) YIELD node, score
    WHERE score > 0 AND node.user_id = $user_id AND node.group_id IN $groups
    WITH coalesce(node.merged_into, node.id) AS id, max(score) AS s  // a merged entity's hit counts for its target
    RETURN collect({id: id, s: s}) AS found
}
WITH reduce(top = 0.0, t IN found | CASE WHEN t.s > top THEN t.s ELSE top END) AS top, found
WITH [t IN found | {id: t.id, s: t.s / top}] AS text
"""

_RETRIEVER_NO_TEXT: LiteralString = """
WITH [] AS text
"""

_RETRIEVER_EXPAND: LiteralString = """
CALL () {
    MATCH (e:Entity {user_id: $user_id, name_lc: $name_lc})
    WHERE $name_lc <> '' AND e.group_id IN $groups
    RETURN collect(DISTINCT coalesce(e.merged_into, e.id)) AS exact
}
UNWIND [t IN text WHERE NOT t.id IN exact] + [x IN exact | {id: x, s: 1.0}] AS cand
WITH cand ORDER BY cand.s DESC, cand.id LIMIT $entity_hits
WITH cand.id AS hit, cand.s AS strength
MATCH (e:Entity {id: hit})
WITH strength, e, COUNT { (e)<-[:MENTIONS]-() } AS df
WITH collect({e: e, strength: strength, df: df}) AS found
WITH found, reduce(acc = [], x IN found | acc + x.e.name + coalesce(x.e.aliases, [])) AS names
UNWIND found AS x
WITH names, x.e AS e, x.strength AS strength, x.df AS df
CALL (e, df) {
    WITH e WHERE df <= $max_mentions
    MATCH (m:Memory)-[:MENTIONS]->(e) WHERE m.deleted_at IS NULL
    RETURN m.id AS mid, 0 AS hop, df AS mdf
    LIMIT $per_entity
  UNION
    WITH e WHERE COUNT { (e)-[:RELATES]-() } <= $hub
    MATCH (e)-[r:RELATES]-(o:Entity)
    WHERE o <> e AND r.invalid_at IS NULL AND r.expired_at IS NULL AND o.merged_into IS NULL
    WITH DISTINCT o LIMIT $neighbours
    WITH o, COUNT { (o)<-[:MENTIONS]-() } AS odf WHERE odf <= $max_mentions
    CALL (o) {
        MATCH (m:Memory)-[:MENTIONS]->(o) WHERE m.deleted_at IS NULL
        RETURN m LIMIT $per_neighbour
    }
    RETURN m.id AS mid, 1 AS hop, odf AS mdf
}
WITH names, mid, sum(strength * CASE hop WHEN 0 THEN 1.0 ELSE $one_hop END
                     / (log(1 + CASE WHEN mdf < 1 THEN 1 ELSE mdf END) / log(2))) AS score
WHERE score > 0
WITH names, mid, score ORDER BY round(score, 6) DESC, mid LIMIT $limit
RETURN names, collect(mid) AS mids, collect(score) AS scores
"""

MEMORY_RETRIEVER: LiteralString = _RETRIEVER_TEXT + _RETRIEVER_EXPAND
MEMORY_RETRIEVER_EXACT: LiteralString = _RETRIEVER_NO_TEXT + _RETRIEVER_EXPAND

FACT_TEXT_HITS: LiteralString = """
CALL db.index.fulltext.queryRelationships($index, $lucene, {limit: $k}) YIELD relationship AS r, score
WHERE score > 0 AND r.user_id = $user_id AND r.group_id IN $groups
  AND ($history OR (r.invalid_at IS NULL AND r.expired_at IS NULL))
RETURN score, """ + FACT_FIELDS

LIST_NODES: LiteralString = """
MATCH (e:Entity)
WHERE e.user_id = $user_id AND e.id > $cursor AND ($groups IS NULL OR e.group_id IN $groups)
WITH e ORDER BY e.user_id, e.id LIMIT $limit  // the (user_id, id) index order: no sort
RETURN e{.id, .name, .type, .aliases, .group_id, .created_at, .merged_into, .merged_at, .resolution_action,
         .resolution_score, .resolution_match_type, .resolution_reason} AS item
"""

LIST_EDGES: LiteralString = """
MATCH ()-[r:RELATES]->()
WHERE r.user_id = $user_id AND r.id > $cursor AND ($groups IS NULL OR r.group_id IN $groups)
  AND ($history OR (r.invalid_at IS NULL AND r.expired_at IS NULL))
  AND startNode(r).merged_into IS NULL AND endNode(r).merged_into IS NULL  // a merged entity's edge: its copy
WITH r ORDER BY r.user_id, r.id LIMIT $limit  // the (user_id, id) index order: no sort
RETURN """ + FACT_FIELDS

LIST_EPISODES: LiteralString = """
MATCH (m:Memory)
WHERE m.user_id = $user_id AND m.id > $cursor AND ($groups IS NULL OR m.group_id IN $groups)
WITH m ORDER BY m.user_id, m.id LIMIT $limit  // the (user_id, id) index order: no sort
RETURN m{.id, .content, .category, .scope, .project_id, .group_id, .agent_id, .created_at, .updated_at,
         .deleted_at, .duplicate_of} AS item
"""

MEMORY_NODES: LiteralString = """
MATCH (m:Memory) WHERE m.id IN $ids AND m.user_id = $user_id
RETURN m{.id, .user_id, .content, .category, .scope, .project_id, .agent_id, .hash, .metadata, .created_at,
         .updated_at, .task_id, .deleted_at} AS item
"""



# ---- export / import (service/portability.py) ---------------------------------------------------

# A merge's copies are not exported: the import replays the merge (curation.MERGE_ENTITIES), which makes them.
EXPORT_ENTITIES: LiteralString = """
MATCH (e:Entity)
WHERE e.user_id = $user_id AND e.id > $cursor AND ($groups IS NULL OR e.group_id IN $groups)
WITH e ORDER BY e.user_id, e.id LIMIT $limit
RETURN e{.id, .name, .type, .aliases, .group_id, .created_at, .description, .attributes, .keys, .not_same_as,
         .resolution_action,
         .resolution_score, .resolution_match_type, .resolution_reason, .resolution_target, .resolved_at,
         .merged_into, .merged_at, .merged_via, .merged_aliases, .merged_keys, .replaced_description,
         same_as: [(e)-[s:SAME_AS]->(t) WHERE s.migrated_from IS NULL |
                   s{target_id: t.id, .status, .score, .match_type, .reason, .created_at, .reviewed_at, .reviewer}]
        } AS item
"""

EXPORT_FACTS: LiteralString = """
MATCH ()-[r:RELATES]->()
WHERE r.user_id = $user_id AND r.id > $cursor AND ($groups IS NULL OR r.group_id IN $groups)
  AND r.migrated_from IS NULL
WITH r ORDER BY r.user_id, r.id LIMIT $limit
RETURN r{.id, .fact, .predicate, .group_id, .valid_at, .invalid_at, .expired_at, .memory_ids,
         .former_memory_ids, .created_at, .confidence, source_id: startNode(r).id, target_id: endNode(r).id} AS item
"""

# The facts that returned memories support (search's include: ["facts"]): the live RELATES edges between entities
# a memory mentions whose `memory_ids` name it, within the caller's groups; each once.
FACTS_OF_MEMORIES: LiteralString = """
MATCH (m:Memory {user_id: $user_id}) WHERE m.id IN $ids
MATCH (m)-[:MENTIONS]->(:Entity)-[r:RELATES]-(:Entity)
WHERE r.user_id = $user_id AND r.group_id IN $groups AND r.expired_at IS NULL AND m.id IN r.memory_ids
WITH DISTINCT r LIMIT $limit
RETURN """ + FACT_FIELDS + """

"""
MENTIONS_OF: LiteralString = """
MATCH (m:Memory)-[r:MENTIONS]->(e:Entity)
WHERE m.id IN $ids AND m.user_id = $user_id AND r.migrated_from IS NULL
RETURN m.id AS memory_id, collect(e.id) AS entity_ids
"""

# Entities and edges keep their ids and every property (validity history included); the tenant key and
# the lower-cased name are derived again, as on a write.
IMPORT_ENTITIES: LiteralString = """
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
SET e += row.identity,
    e.user_id = $user_id, e.group_id = row.group_id, e.name = row.name, e.name_lc = row.name_lc,
    e.type = row.type, e.aliases = row.aliases, e.created_at = row.created_at, e.ft_key = row.ft_key,
    e.keys = row.keys
"""


# An import restores: a memory deleted here before (its node kept as a tombstone) lives again.
IMPORT_MEMORIES: LiteralString = """
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
ON CREATE SET m.edge_ids = []
SET m += row, m.deleted_at = null, m.duplicate_of = null
"""

IMPORT_FACTS: LiteralString = """
UNWIND $rows AS row
MATCH (s:Entity {id: row.source_id, user_id: $user_id})
MATCH (o:Entity {id: row.target_id, user_id: $user_id})
MERGE (s)-[r:RELATES {key: row.id}]->(o)
SET r.id = row.id, r.user_id = $user_id, r.group_id = row.group_id, r.predicate = row.predicate, r.fact = row.fact,
    r.valid_at = row.valid_at, r.invalid_at = row.invalid_at, r.expired_at = row.expired_at,
    r.memory_ids = row.memory_ids, r.former_memory_ids = row.former_memory_ids, r.created_at = row.created_at,
    r.ft_key = row.ft_key, r.confidence = row.confidence,
    r.slot = CASE WHEN row.invalid_at IS NULL AND row.expired_at IS NULL THEN s.id + '|' + row.predicate END
WITH row
UNWIND row.memory_ids + row.former_memory_ids AS mid
MATCH (m:Memory {id: mid})
SET m.edge_ids = CASE WHEN row.id IN coalesce(m.edge_ids, []) THEN m.edge_ids ELSE coalesce(m.edge_ids, []) + row.id END
"""

# Relations written before keys and slots: the original edge of each id gets `key` (a second edge with
# the same id, which only a race of two writers could have made, gets a key no write looks up), live edges get
# `slot`. One pass over the relationships, committed in batches (CALL ... IN TRANSACTIONS: an auto-commit
# statement); a no-op pass over a migrated graph reads each relationship once.
MIGRATE_RELATION_KEYS: LiteralString = """
MATCH ()-[r:RELATES]->()
WHERE (r.key IS NULL AND r.migrated_from IS NULL)
   OR (r.slot IS NULL AND r.invalid_at IS NULL AND r.expired_at IS NULL)
CALL (r) {
    WITH r, startNode(r) AS s
    SET r.key = CASE WHEN r.key IS NOT NULL OR r.migrated_from IS NOT NULL THEN r.key
                     WHEN EXISTS { MATCH ()-[x:RELATES {key: r.id}]->() } THEN r.id + '|dup|' + elementId(r)
                     ELSE r.id END,
        r.slot = CASE WHEN r.invalid_at IS NULL AND r.expired_at IS NULL THEN s.id + '|' + r.predicate
                      ELSE r.slot END
} IN TRANSACTIONS OF $batch ROWS
RETURN count(*) AS migrated
"""
