"""The graph as the console draws it: a few entities (the ones a search names, else the most connected) and the
facts around them (the graph API's `entity_facts`, service/stores/facts.py; entities: the console reads of
service/stores/console.py); a click on a node asks for that node's neighbourhood. Every read is bounded, so a page
costs what it shows, not the user's graph."""

from __future__ import annotations

from typing import Any

from service.deps import Deps

SEEDS = 30  # entities drawn at first
FACTS = 240  # facts read around them (each seed brings at most its share)


def elements(seeds: list[dict[str, Any]], facts: list[dict[str, Any]], selected: bool) -> dict[str, Any]:
    """Cytoscape's elements: the seeds (marked `selected` when a search named them) and the other end of each fact."""
    nodes: dict[str, dict[str, Any]] = {
        str(e["id"]): {"id": str(e["id"]), "label": str(e.get("name") or e["id"]), "selected": selected}
        for e in seeds}
    edges = []
    for f in facts:
        for end, name in (("source_id", "source"), ("target_id", "target")):
            nodes.setdefault(str(f[end]), {"id": str(f[end]), "label": str(f.get(name) or f[end]), "selected": False})
        edges.append({"id": str(f["id"]), "source": str(f["source_id"]), "target": str(f["target_id"]),
                      "label": str(f.get("predicate") or ""), "fact": str(f.get("fact") or ""),
                      "current": not (f.get("invalid_at") or f.get("expired_at"))})
    return {"nodes": list(nodes.values()), "edges": edges}


async def view(deps: Deps, user_id: str, query: str, history: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The entities a search names (else the most connected ones) and the graph drawn around them."""
    seeds = await deps.graph.console.find_entities(user_id, query, SEEDS)
    rows, _ = await deps.graph.facts.entity_facts(user_id, [str(e["id"]) for e in seeds], include_history=history,
                                            limit=FACTS)
    return seeds, elements(seeds, [r["fact"] for r in rows], selected=bool(query))


async def neighbourhood(deps: Deps, user_id: str, entity_id: str, history: bool) -> dict[str, Any]:
    """One entity's facts and neighbours (a click on a node); empty for an entity of another user."""
    entity = await deps.graph.console.entities(user_id, [entity_id])
    rows, _ = await deps.graph.facts.entity_facts(user_id, [entity_id], include_history=history,
                                                  limit=FACTS) if entity \
        else ([], None)
    return elements(entity, [r["fact"] for r in rows], selected=False)
