"""The statements of the graph's reads: fact search, the graph retriever of a search, the facts returned memories
support, and the cursor-paged listings of nodes, edges and episodes."""

from __future__ import annotations

from typing import LiteralString

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

# Entity-linked expansion (service/search/expansion.py): the memories that share an entity with the seeds (the
# first hits of a search), each entity weighted by its inverse frequency among the user's memories, log(N / df);
# an entity mentioned by more than $max_share of them (a speaker, the user; at least 2) links nothing.
FACT_TEXT_HITS: LiteralString = """
CALL db.index.fulltext.queryRelationships($index, $lucene, {limit: $k}) YIELD relationship AS r, score
WHERE score > 0 AND r.user_id = $user_id AND r.group_id IN $groups
  AND ($history OR (r.invalid_at IS NULL AND r.expired_at IS NULL))
RETURN score, """ + FACT_FIELDS

LIST_NODES: LiteralString = """
MATCH (e:Entity)
WHERE e.user_id = $user_id AND e.id > $cursor AND ($groups IS NULL OR e.group_id IN $groups)
WITH e ORDER BY e.user_id, e.id LIMIT $limit  // the (user_id, id) index order: no sort
RETURN e{.id, .name, .type, .aliases, .roles, .group_id, .created_at, .merged_into, .merged_at, .resolution_action,
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

# The facts that returned memories support (search's include: ["facts"]): the live RELATES edges between entities
# a memory mentions whose `memory_ids` name it, within the caller's groups; each once.
# Each edge a memory states (its id in the edge's memory_ids) with the memories that state the live edges of the
# same subject and predicate that retired it (empty for a live edge, or one retired by an update with no successor).
RETIRED_BY: LiteralString = """
MATCH (m:Memory {user_id: $user_id}) WHERE m.id IN $ids
UNWIND coalesce(m.edge_ids, []) AS eid
MATCH (s:Entity)-[r:RELATES {id: eid}]->()
WHERE r.user_id = $user_id AND r.group_id IN $groups AND m.id IN r.memory_ids
OPTIONAL MATCH (s)-[n:RELATES {predicate: r.predicate}]->()
WHERE r.invalid_at IS NOT NULL AND n.user_id = $user_id AND n.invalid_at IS NULL AND n.expired_at IS NULL
  AND n.valid_at >= r.invalid_at
RETURN m.id AS memory_id, r.id AS edge_id, collect(n.memory_ids) AS successors
"""

FACTS_OF_MEMORIES: LiteralString = """
MATCH (m:Memory {user_id: $user_id}) WHERE m.id IN $ids
MATCH (m)-[:MENTIONS]->(:Entity)-[r:RELATES]-(:Entity)
WHERE r.user_id = $user_id AND r.group_id IN $groups AND r.expired_at IS NULL AND m.id IN r.memory_ids
WITH DISTINCT r LIMIT $limit
RETURN """ + FACT_FIELDS + """

"""
