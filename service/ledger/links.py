"""A structured write's links, kept in its memory's `metadata.graph` so that every path that re-derives a memory's
links (the outbox drain, the full reconcile, an update) finds the same entities and relations again."""

from __future__ import annotations

from typing import Any

from service.core.domain import Memory
from service.stores.graph import EntityRef, MemoryLinks, RelationRef

KEY = "graph"  # the metadata key


def structured_links(memory: Memory) -> MemoryLinks | None:
    """The links `metadata.graph` states, or None (not a structured write, or not a shape this service wrote)."""
    raw = memory.metadata.get(KEY)
    if not isinstance(raw, dict):
        return None
    try:
        entities = [EntityRef(name=str(e["name"]), type=str(e.get("type") or "thing"),
                              aliases=tuple(str(a) for a in e.get("aliases") or ()), id=e.get("id"),
                              description=e.get("description"), attributes=e.get("attributes"))
                    for e in raw.get("entities") or []]
        relations = [RelationRef(subject=str(r["subject"]), predicate=str(r["predicate"]), object=str(r["object"]),
                                 fact=str(r.get("fact") or ""), valid_at=r.get("valid_at"),
                                 confidence=float(r["confidence"]) if r.get("confidence") is not None else None)
                     for r in raw.get("relations") or []]
    except (KeyError, TypeError, ValueError):
        return None
    return MemoryLinks(memory_id=memory.id, entities=entities, relations=relations)


def entity_entry(name: str, type_: str, *, aliases: list[str] | None = None, entity_id: str | None = None,
                 description: str | None = None, attributes: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "type": type_}
    if aliases:
        entry["aliases"] = aliases
    if entity_id is not None:
        entry["id"] = entity_id
    if description is not None:
        entry["description"] = description
    if attributes is not None:
        entry["attributes"] = attributes
    return entry
