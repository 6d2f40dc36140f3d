"""The entity step every graph write shares inside its transaction (a memory's links, memories.py; a run's
touched entities, runs.py): the new entities through the identity gate when the rules have one (resolution.py),
else each `existing` or `created`; the entities MERGEd with what the gate linked; then a structured write's
details and confidences, and the report of what was decided per memory (the task result's `entities`)."""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.stores.graph import EntityNameRules
from service.stores.neo4j import cypher_writes, resolution
from service.stores.neo4j.rows import MAX_ALIASES, MAX_ROLES
from service.stores.reports import EntityDecision, GraphReport

Origin = dict[str, tuple[str, str]]  # each entity row's id before the gate -> (name, type)
Named = list[tuple[str, str]]  # (memory id, entity row id) before the gate


_EXISTING: LiteralString = """
UNWIND $ids AS id
MATCH (e:Entity {id: id})
RETURN e.id AS id, coalesce(e.merged_into, e.id) AS target
"""

_DETAILS: LiteralString = """
UNWIND $rows AS row
MATCH (e:Entity {id: row.id})
SET e.description = coalesce(row.description, e.description),
    e.attributes = coalesce(row.attributes, e.attributes)
"""

_CONFIDENCE: LiteralString = """
UNWIND $rows AS row
MATCH ()-[r:RELATES {key: row.id}]->()
SET r.confidence = row.confidence
"""


async def decided_without_gate(tx: AsyncManagedTransaction, ids: list[str]) -> list[dict[str, Any]]:
    """Without a resolution gate an entity is `existing` (its spelling's node is there) or `created`. Read before
    the entities are MERGEd."""
    held = {str(r["id"]): str(r["target"]) for r in await (await tx.run(_EXISTING, ids=ids)).data()}
    return [{"id": i, "entity_id": held.get(i, i), "decision": "existing" if i in held else "created",
             "matched_id": None, "score": None, "match_type": None} for i in ids]


async def write_entities(tx: AsyncManagedTransaction, graph: dict[str, list[dict[str, Any]]], now: str,
                         names: EntityNameRules, vectors: dict[str, list[float]]) -> tuple[Origin, Named]:
    """Decide the entities (the gate rewrites the rows in place: "mentions", "same_as", "decided"), MERGE them and
    the gate's SAME_AS pairs. Returns what `finish_links` reports against."""
    origin = {r["id"]: (r["name"], r["type"]) for r in graph["entities"]}
    named = [(m["memory_id"], m["entity_id"]) for m in graph["mentions"]]
    if graph["entities"]:
        if names.resolves:
            await resolution.resolve(tx, names, graph, now, vectors)
        else:
            graph["decided"] = await decided_without_gate(tx, list(origin))
        await (await tx.run(cypher_writes.UPSERT_ENTITIES, rows=graph["entities"], max_aliases=MAX_ALIASES,
                            max_roles=MAX_ROLES)).consume()
    if graph.get("same_as"):
        await (await tx.run(resolution.SAME_AS, rows=graph["same_as"])).consume()
    return origin, named


async def finish_links(tx: AsyncManagedTransaction, graph: dict[str, list[dict[str, Any]]], origin: Origin,
                       named: Named) -> GraphReport:
    """After the links are written: a structured write's entity details and relation confidences, then the report.
    `origin`: each entity row's id before the gate -> (name, type); `named`: (memory id, entity row id) before it."""
    final = {str(d["id"]): d for d in graph.get("decided", [])}
    details = [{**d, "id": str(final.get(d["id"], {}).get("entity_id", d["id"]))} for d in graph.get("details", [])]
    if details:
        await (await tx.run(_DETAILS, rows=details)).consume()
    confident = [{"id": r["id"], "confidence": float(r["confidence"])} for r in graph["relations"]
                 if r.get("confidence") is not None]
    if confident:
        await (await tx.run(_CONFIDENCE, rows=confident)).consume()
    report = GraphReport()
    for memory_id, first in named:
        name, etype = origin.get(first, ("", "thing"))
        d = final.get(first, {"entity_id": first, "decision": "created"})
        decision = EntityDecision(name=name, type=etype, entity_id=str(d["entity_id"]), decision=str(d["decision"]),
                                  matched_id=d.get("matched_id"), score=d.get("score"), match_type=d.get("match_type"))
        listed = report.entities.setdefault(memory_id, [])
        if decision not in listed:
            listed.append(decision)
    for r in graph["relations"]:
        report.relations[r["memory_id"]] = report.relations.get(r["memory_id"], 0) + 1
    return report
