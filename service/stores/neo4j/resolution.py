"""The resolution gate applied to a graph write (the store's `EntityNameRules` decide; this module fetches and
rewrites).

The names' embeddings are computed before the transaction (`vectors`); a candidate whose name has no vector of
this embedder yet raises `MissingNameVectors`, and the store embeds those names and runs the transaction again.
Inside the write's transaction, before any entity is MERGEd:

1. entities of the batch that already exist keep their decision; one merged into another is written to its
   target (`merged_into`);
2. every new one gets candidates from the same user and group by index, never by a scan: the `entity_keys`
   full-text index (keyword analyzer: the normalised keys of every name and alias, exact), the `entity_text`
   one (name/alias terms, fuzzy and prefix), and the vector index of the entities' name embeddings;
   entities created earlier in the same batch are candidates too;
3. the gate decides: *merge* drops the new node (its mentions and facts go to the target, its spelling joins
   the target's aliases), *pending* creates it with a `SAME_AS {status: "pending"}` edge to the match,
   *create* creates it. The decision is stored on the node.

Relation ids are derived from the names of the entities they finally connect, so a fact about an entity
that resolved to itself keeps the id it always had.
"""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.core.metrics import ENTITY_RESOLUTIONS
from service.stores.graph import MERGE, PENDING, Candidate, EntityNameRules
from service.stores.neo4j.executor import MissingNameVectors
from service.stores.neo4j.lucene import lucene_escape
from service.stores.neo4j.rows import entity_id, meaning_name, relation_id

KEY_INDEX = "entity_keys"
CANDIDATES_PER_INDEX = 20
VECTOR_CANDIDATES = 64  # the vector index is not tenant-filtered: read this many, keep the caller's
MAX_MERGE_HOPS = 5
UNPLACED = "?"  # the meaning of a mention with no role when its name has several: one node, pending pairs to each


def vector_index(dim: int) -> str:
    return f"entity_name_vec_{int(dim)}"


def vector_property(dim: int) -> str:
    """One property (and index) per dimension: a graph shared by services with different embedders (or a
    change of embedder) keeps each one's vectors apart; Neo4j allows one vector index per property."""
    return f"name_vec_{int(dim)}"


def schema(dim: int) -> tuple[LiteralString, ...]:
    return (
        # keyword analyzer: each key is one exact token (a list property, one entry per name and alias)
        "CREATE FULLTEXT INDEX entity_keys IF NOT EXISTS FOR (e:Entity) ON EACH [e.keys, e.ft_key] "
        "OPTIONS {indexConfig: {`fulltext.analyzer`: 'keyword'}}",
        "CREATE VECTOR INDEX " + vector_index(dim) + " IF NOT EXISTS FOR (e:Entity) "
        "ON e." + vector_property(dim) + " OPTIONS {indexConfig: {`vector.dimensions`: " + str(int(dim)) + ", "
        "`vector.similarity_function`: 'cosine'}}",
        "CREATE INDEX same_as_user IF NOT EXISTS FOR ()-[s:SAME_AS]-() ON (s.user_id, s.status)",
    )


EXISTING: LiteralString = """
UNWIND $ids AS id
MATCH (e:Entity {id: id})
RETURN e.id AS id, e.name AS name, e.type AS type, e.merged_into AS merged_into,
       e.name_vector_model AS name_vector_model, e.roles AS roles
"""

CANDIDATES: LiteralString = """
UNWIND $rows AS row
CALL (row) {
    CALL db.index.fulltext.queryNodes($key_index, row.key_query, {limit: $k}) YIELD node
    WHERE node.user_id = row.user_id AND node.group_id = row.group_id
    RETURN node
  UNION
    CALL db.index.fulltext.queryNodes($text_index, row.text_query, {limit: $k}) YIELD node
    WHERE node.user_id = row.user_id AND node.group_id = row.group_id
    RETURN node
  UNION
    WITH row WHERE row.vector IS NOT NULL  // a name of separators only has no embedding
    CALL db.index.vector.queryNodes($vector_index, $vk, row.vector) YIELD node
    WHERE node.user_id = row.user_id AND node.group_id = row.group_id
    RETURN node
}
WITH row, node WHERE node.merged_into IS NULL AND node.id <> row.id
RETURN row.id AS id, collect(node{.id, .name, .type, .aliases, .name_vector_model, .not_same_as, .roles,
                                  name_vector: node[$vector_property]}) AS candidates
"""

# The other live entities of a row's spelling (its other meanings, or another family's node of the name).
MEANINGS_HELD: LiteralString = """
UNWIND $rows AS row
MATCH (e:Entity {user_id: row.user_id, name_lc: row.name_lc})
WHERE e.group_id = row.group_id AND e.id <> row.id AND e.merged_into IS NULL
RETURN row.id AS id, collect(e.type) AS types
"""

SAME_AS: LiteralString = """
UNWIND $rows AS row
MATCH (s:Entity {id: row.source_id})
MATCH (t:Entity {id: row.target_id})
MERGE (s)-[r:SAME_AS]->(t)
ON CREATE SET r.status = 'pending', r.score = row.score, r.match_type = row.match_type, r.reason = row.reason,
              r.user_id = row.user_id, r.group_id = row.group_id, r.created_at = row.created_at
"""


def _text_query(ft: str, name: str) -> str:
    terms = [w for w in name.split() if any(ch.isalnum() for ch in w)][:8]
    parts: list[str] = []
    for w in terms:
        t = lucene_escape(w.casefold())
        parts.append(t)
        if len(w) >= 4:
            parts += [f"{t}~1", f"{t}*"]
        if len(w) >= 6:
            parts.append(f"{lucene_escape(w[:3].casefold())}*")
    body = " ".join(parts) or '"-"'  # no searchable term: a clause that matches nothing
    return f"+ft_key:{ft}^0 +(name:({body}) aliases:({body}))"


def key_query(ft: str, keys: list[str]) -> str:
    quoted = " ".join('"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"' for k in keys) or '"-"'
    return f"+ft_key:{ft}^0 +keys:({quoted})"


async def resolve(tx: AsyncManagedTransaction, rules: EntityNameRules, graph: dict[str, list[dict[str, Any]]],
                  now: str, vectors: dict[str, list[float]]) -> None:
    """Rewrite the batch's rows in place (entities, mentions, relations) by the gate's decisions (existing
    entities keep theirs), and add `same_as` rows. `vectors`: name key -> embedding, for the batch's names."""
    rows = graph["entities"]
    origin = [(r["id"], r) for r in rows]  # each row's id before the gate (a row's id may change below)
    remap: dict[str, str] = {}
    names: dict[str, str] = {r["id"]: r.get("id_name") or r["name"] for r in rows}  # relation ids' names
    existing = await _existing(tx, rows)
    for row in rows:  # a name the graph holds as an entity of another family (or generic) is another entity
        held = existing.get(row["id"])
        if held is not None and not rules.same_node(row["type"], str(held.get("type") or "thing")):
            _qualify(row, f"{row['name']}|{rules.type_family(row['type'])}", remap, names)
    if remap:
        existing = await _existing(tx, rows)
    meanings = False
    for row in rows:  # ... and so is one whose memories say it is something else ("the plumber" / "our VP")
        held = existing.get(row["id"])
        meaning = (rules.other_meaning(row["roles"], held.get("roles") or [])
                   if held is not None and not row.get("pinned") else None)
        if meaning:
            # from the name itself, also when its family qualified it above: one meaning, one id, by either path
            _qualify(row, meaning_name(row["name"], rules.type_family(row["type"]), meaning), remap, names)
            meanings = True
    for row in await _unplaced(tx, rules, rows, existing):  # no role, and the name has several meanings
        _qualify(row, meaning_name(row["name"], rules.type_family(row["type"]), UNPLACED), remap, names)
        meanings = True
    if meanings:
        existing = await _existing(tx, rows)
    # vectors are sent only for entities that do not hold this model's vector yet
    unvectored = {r["id"] for r in rows if existing.get(r["id"], {}).get("name_vector_model") != rules.model}
    by_key = vectors
    for row in rows:
        vec = by_key.get(rules.name_key(row["name"])) if row["id"] in unvectored else None
        row["vector"], row["vector_model"] = vec, rules.model
        row["vector_props"] = {vector_property(rules.dim): vec} if vec is not None else {}
    merged = {i: str(e["merged_into"]) for i, e in existing.items() if e.get("merged_into")}
    remap.update(await _final_targets(tx, merged, names))

    new = [r for r in rows if r["id"] not in existing]
    found: dict[str, list[dict[str, Any]]] = {}
    if new:
        params = [{"id": r["id"], "user_id": r["user_id"], "group_id": r["group_id"],
                   "key_query": key_query(r["ft_key"], r["keys"]), "text_query": _text_query(r["ft_key"], r["name"]),
                   "vector": r["vector"]} for r in new]
        result = await tx.run(CANDIDATES, rows=params, key_index=KEY_INDEX, text_index="entity_text",
                              vector_index=vector_index(rules.dim), vector_property=vector_property(rules.dim),
                              k=CANDIDATES_PER_INDEX, vk=VECTOR_CANDIDATES)
        # records read as they are: `.data()` would walk every float of every candidate's name vector (up to
        # 104 candidates x 384 floats per new entity) through the driver's recursive transform, which was a
        # third of the gate's Python time in bulk writes; the candidates are map projections already
        found = {str(r["id"]): list(r["candidates"]) async for r in result}
        stale = [str(c["name"]) for cs in found.values() for c in cs if c.get("name_vector_model") != rules.model
                 and rules.name_key(str(c["name"])) and rules.name_key(str(c["name"])) not in by_key]
        if stale:  # written before name vectors, or by another embedder
            raise MissingNameVectors(sorted(set(stale)))

    created: list[dict[str, Any]] = []  # new rows kept, candidates for the rows after them
    same_as: list[dict[str, Any]] = []
    drop: set[str] = set()
    decided: dict[str, dict[str, Any]] = {}  # the row's id after the type check -> what the gate did
    for row in new:
        cands = [_candidate(c, rules, by_key) for c in found.get(row["id"], [])]
        cands += [Candidate(c["id"], c["name"], c["type"], tuple(c["names"]), c["vector"], roles=tuple(c["roles"]))
                  for c in created if c["group_id"] == row["group_id"]]
        decision = rules.decide(row["name"], row["type"], row["vector"], cands, row["roles"])
        ENTITY_RESOLUTIONS.labels(action=decision.action).inc()
        if decision.action == MERGE and decision.target_id:
            target = remap.get(decision.target_id, decision.target_id)
            remap[row["id"]] = target
            names.setdefault(target, decision.target_name or row["name"])
            drop.add(row["id"])
            _alias(rows, row, target, decision.target_name or row["name"])
            decided[row["id"]] = {"entity_id": target, "decision": "merged", "matched_id": target,
                                  "score": decision.score, "match_type": decision.match_type}
            continue
        row.update(resolution_action=decision.action, resolution_score=decision.score,
                   resolution_match_type=decision.match_type, resolution_reason=decision.reason,
                   resolution_target=decision.target_id, resolved_at=now)
        created.append(row)
        decided[row["id"]] = {"entity_id": row["id"],
                              "decision": "pending" if decision.action == PENDING else "created",
                              "matched_id": decision.target_id if decision.action == PENDING else None,
                              "score": decision.score, "match_type": decision.match_type}
        if decision.action == PENDING and decision.target_id:
            for pair in (decision, *decision.also):  # an ambiguous name: a pending pair to each match
                same_as.append({"source_id": row["id"], "target_id": pair.target_id, "score": pair.score,
                                "match_type": pair.match_type, "reason": pair.reason,
                                "user_id": row["user_id"], "group_id": row["group_id"], "created_at": now})
    graph["entities"] = sorted((r for r in rows if r["id"] not in drop), key=lambda r: str(r["id"]))
    _rewire(graph, remap, names)
    graph["same_as"] = same_as
    graph["decided"] = [{"id": first, **decided.get(row["id"], {
        "entity_id": remap.get(row["id"], row["id"]), "decision": "existing", "matched_id": None, "score": None,
        "match_type": None})} for first, row in origin]


async def _unplaced(tx: AsyncManagedTransaction, rules: EntityNameRules, rows: list[dict[str, Any]],
                    existing: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with no role whose spelling's entity is one of several meanings held (live entities of that name
    and family): which one the mention means is the reviewer's call (docs/identity.md, Meanings)."""
    roleless = [r for r in rows if not r["roles"] and not r.get("pinned") and r["id"] in existing
                and not existing[r["id"]].get("merged_into")]
    if not roleless:
        return []
    params = [{"id": r["id"], "user_id": r["user_id"], "group_id": r["group_id"], "name_lc": r["name_lc"]}
              for r in roleless]
    others = {str(r["id"]): list(r["types"]) async for r in await tx.run(MEANINGS_HELD, rows=params)}
    return [r for r in roleless if any(rules.type_family(str(t or "thing")) == rules.type_family(r["type"])
                                       for t in others.get(r["id"], []))]


def _candidate(c: dict[str, Any], rules: EntityNameRules, by_key: dict[str, list[float]]) -> Candidate:
    vec = (c.get("name_vector") if c.get("name_vector_model") == rules.model
           else by_key.get(rules.name_key(str(c["name"]))))
    return Candidate(str(c["id"]), str(c["name"]), str(c.get("type") or "thing"), tuple(c.get("aliases") or ()),
                     vec, tuple(c.get("not_same_as") or ()), tuple(c.get("roles") or ()))


def _qualify(row: dict[str, Any], qualified: str, remap: dict[str, str], names: dict[str, str]) -> None:
    """The row is another entity than the one its spelling's id holds: its id is derived from `qualified` (the name
    with its family, or with its meaning), which relation ids are derived from too."""
    old, new = row["id"], entity_id(row["user_id"], row["group_id"], qualified)
    for first, now in list(remap.items()):  # qualified twice (by family, then by meaning): the first id follows
        if now == old:
            remap[first] = new
    remap[old] = row["id"] = new
    names[new] = qualified


def _alias(rows: list[dict[str, Any]], row: dict[str, Any], target: str, target_name: str) -> None:
    """The merged spelling joins the target: the target's own row when in the batch, else an alias row."""
    for r in rows:
        if r["id"] == target:
            r["names"] = list(dict.fromkeys([*r["names"], *row["names"]]))
            r["keys"] = sorted({*r["keys"], *row["keys"]})
            return
    rows.append({**row, "id": target, "name": target_name, "name_lc": target_name.casefold(),
                 "names": row["names"], "vector": None, "vector_model": None, "vector_props": {}})


async def _existing(tx: AsyncManagedTransaction, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in await (await tx.run(EXISTING, ids=[r["id"] for r in rows])).data()}


async def _final_targets(tx: AsyncManagedTransaction, merged: dict[str, str],
                         names: dict[str, str]) -> dict[str, str]:
    """Each merged entity's live target (following merged_into, at most MAX_MERGE_HOPS)."""
    final = dict(merged)
    for _ in range(MAX_MERGE_HOPS):
        pending = sorted(set(final.values()))
        if not pending:
            break
        rows = {r["id"]: r for r in await (await tx.run(EXISTING, ids=pending)).data()}
        moved = False
        for src, tgt in final.items():
            info = rows.get(tgt)
            if info is None:
                continue
            names[tgt] = str(info["name"])
            if info.get("merged_into"):
                final[src] = str(info["merged_into"])
                moved = True
        if not moved:
            break
    return final


def _rewire(graph: dict[str, list[dict[str, Any]]], remap: dict[str, str], names: dict[str, str]) -> None:
    if not remap:
        return
    mentions = {(remap.get(m["entity_id"], m["entity_id"]), m["memory_id"]): m for m in graph["mentions"]}
    graph["mentions"] = [{**m, "entity_id": e} for (e, _), m in sorted(mentions.items())]
    relations = []
    for r in graph["relations"]:
        src, dst = remap.get(r["source_id"], r["source_id"]), remap.get(r["target_id"], r["target_id"])
        if src != r["source_id"] or dst != r["target_id"]:
            group = r["group_id"]
            r = {**r, "source_id": src, "target_id": dst,
                 "id": relation_id(r["user_id"], group, names.get(src, ""), r["predicate"], names.get(dst, ""))}
        relations.append(r)
    graph["relations"] = sorted(relations, key=lambda r: (min(r["source_id"], r["target_id"]), r["id"],
                                                          r["memory_id"]))
