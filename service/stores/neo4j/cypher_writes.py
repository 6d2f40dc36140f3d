"""The statements of a memory's graph write: memories, entities, mentions and relations MERGEd, single-valued
facts superseded, support dropped on an update, removals (deletes and duplicates) and erasure.

Temporal model of a RELATES edge: `valid_at` is when the fact became true, `invalid_at` when it stopped
being true (a newer single-valued fact, or an update that no longer states it), and `expired_at` when the
graph stopped treating it as current (invalidation or loss of every supporting memory). Superseded facts
stay as history; a user's delete erases.

Also the merge of one entity into another (curation.py's merges and an import's replay of them run it)."""

from __future__ import annotations

from typing import LiteralString

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

# A new entity carries the resolution gate's decision (service/identity/); `keys` (every name's and alias's
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
    e.keys = reduce(acc = coalesce(e.keys, []), k IN row.keys | CASE WHEN k IN acc THEN acc ELSE acc + k END),
    e.roles = reduce(acc = coalesce(e.roles, []), r IN coalesce(row.roles, []) |
                     CASE WHEN r IN acc OR size(acc) >= $max_roles THEN acc ELSE acc + r END)
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


# Idempotent: a second run finds every copy made and the marker set, and changes nothing.
MERGE_ENTITIES: LiteralString = """
MATCH (s:Entity {id: $source_id}) WHERE s.user_id = $user_id
MATCH (t:Entity {id: $target_id}) WHERE t.user_id = $user_id
WITH s, t, [n IN [s.name] + coalesce(s.aliases, []) WHERE n <> t.name AND NOT n IN t.aliases] AS names,
     [k IN coalesce(s.keys, []) WHERE NOT k IN coalesce(t.keys, [])] AS keys,
     size(coalesce(s.description, '')) > size(coalesce(t.description, '')) AS longer
SET s.merged_aliases = CASE WHEN s.merged_into = t.id THEN s.merged_aliases ELSE names END,
    s.merged_keys = CASE WHEN s.merged_into = t.id THEN s.merged_keys ELSE keys END,
    s.replaced_description = CASE WHEN s.merged_into = t.id THEN s.replaced_description
                                  WHEN longer THEN coalesce(t.description, '') ELSE null END,
    t.aliases = t.aliases + names, t.keys = coalesce(t.keys, []) + keys,
    t.description = CASE WHEN longer THEN s.description ELSE t.description END,
    s.merged_at = coalesce(CASE WHEN s.merged_into = t.id THEN s.merged_at END, $now),
    s.merged_into = t.id
WITH s, t
CALL (s, t) {
    MATCH (m:Memory)-[:MENTIONS]->(s) WHERE NOT (m)-[:MENTIONS]->(t)
    CREATE (m)-[:MENTIONS {migrated_from: s.id, live_of: CASE WHEN m.deleted_at IS NULL THEN t.id END}]->(t)
}
CALL (s, t) {  // "is it copied already": a seek of the id index (a walk between t and o cost either one's degree)
    MATCH (s)-[r:RELATES]->(o:Entity) WHERE o <> t
      AND NOT EXISTS { MATCH ()-[c:RELATES {id: r.id}]->() USING INDEX SEEK c:RELATES(id)
                       WHERE startNode(c) = t AND endNode(c) = o }
    CREATE (t)-[c:RELATES]->(o)
    SET c = r{.*, key: null, migrated_from: s.id,  // a copy has no key: writes find the original by it
              slot: CASE WHEN r.invalid_at IS NULL AND r.expired_at IS NULL THEN t.id + '|' + r.predicate END}
}
CALL (s, t) {
    MATCH (o:Entity)-[r:RELATES]->(s) WHERE o <> t
      AND NOT EXISTS { MATCH ()-[c:RELATES {id: r.id}]->() USING INDEX SEEK c:RELATES(id)
                       WHERE startNode(c) = o AND endNode(c) = t }
    CREATE (o)-[c:RELATES]->(t) SET c = r{.*, key: null, migrated_from: s.id}
}
CALL (s, t) {
    MATCH (s)-[r:SAME_AS]->(o:Entity) WHERE o <> t AND NOT (t)-[:SAME_AS]-(o)
    CREATE (t)-[c:SAME_AS]->(o) SET c = properties(r), c.migrated_from = s.id
}
CALL (s, t) {
    MATCH (o:Entity)-[r:SAME_AS]->(s) WHERE o <> t AND NOT (o)-[:SAME_AS]-(t)
    CREATE (o)-[c:SAME_AS]->(t) SET c = properties(r), c.migrated_from = s.id
}
CALL (s, t) {
    MATCH (tr:Trace)-[r:TOUCHED]->(s) WHERE NOT (tr)-[:TOUCHED]->(t)
    CREATE (tr)-[:TOUCHED {migrated_from: s.id}]->(t)
}
CALL (s, t) {  // the pair itself, if the gate had proposed it
    MATCH (s)-[r:SAME_AS]-(t) WHERE coalesce(r.migrated_from, '') = '' AND r.status <> 'confirmed'
    SET r.status = 'confirmed', r.reviewed_at = coalesce(r.reviewed_at, $now)
}
CALL (s, t) {  // entities merged into the source before follow it to the target
    MATCH (a:Entity {merged_into: s.id}) USING INDEX SEEK a:Entity(merged_into) WHERE a.user_id = $user_id
    SET a.merged_into = t.id, a.merged_via = s.id
}
RETURN t.id AS id
"""
