"""The statements of a user's export (entities, facts, mentions; paged by id) and import (every id, property and
validity kept; service/memory/portability.py)."""

from __future__ import annotations

from typing import LiteralString

# A merge's copies are not exported: the import replays the merge (cypher_writes.MERGE_ENTITIES), which makes them.
EXPORT_ENTITIES: LiteralString = """
MATCH (e:Entity)
WHERE e.user_id = $user_id AND e.id > $cursor AND ($groups IS NULL OR e.group_id IN $groups)
WITH e ORDER BY e.user_id, e.id LIMIT $limit
RETURN e{.id, .name, .type, .aliases, .group_id, .created_at, .description, .attributes, .keys, .not_same_as,
         .roles, .resolution_action,
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

IMPORT_SAME_AS: LiteralString = """
UNWIND $rows AS row
MATCH (s:Entity {id: row.source_id, user_id: $user_id})
MATCH (t:Entity {id: row.target_id, user_id: $user_id})
MERGE (s)-[r:SAME_AS]->(t)
SET r += row.props, r.user_id = $user_id, r.group_id = s.group_id
"""
