"""The graph as the console draws it: the user's entities and facts, read through the same listings as
GET /v1/graph/nodes and /v1/graph/edges (`MemoryService.list_nodes`, `list_edges`), page by page up to a bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.deps import Deps

MAX_NODES = 3000  # the view reads at most this many entities and MAX_EDGES facts (docs/console.md)
MAX_EDGES = 6000
PAGE = 500


@dataclass
class GraphView:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> the node listing's item
    edges: list[dict[str, Any]] = field(default_factory=list)  # the edge listing's items
    capped: bool = False

    def entity(self, entity_id: str) -> dict[str, Any] | None:
        return self.nodes.get(entity_id)

    def facts_of(self, entity_id: str) -> list[dict[str, Any]]:
        return [e for e in self.edges if entity_id in (e.get("source_id"), e.get("target_id"))]

    def matching(self, query: str) -> set[str]:
        """Entities whose name or an alias contains the query (case-insensitive), live ones only."""
        q = query.casefold().strip()
        return {i for i, n in self.nodes.items() if not n.get("merged_into") and (
            q in str(n.get("name") or "").casefold() or any(q in str(a).casefold() for a in n.get("aliases") or []))}

    def elements(self, shown: set[str] | None) -> dict[str, Any]:
        """Cytoscape's elements: every live entity and fact, each marked `shown` when it is drawn at first (all of
        them without a selection; else the selection and its neighbours). A click shows a node's neighbours."""
        live = {i: n for i, n in self.nodes.items() if not n.get("merged_into")}
        edges = [e for e in self.edges if e.get("source_id") in live and e.get("target_id") in live]
        visible = set(live) if shown is None else set(shown)
        if shown is not None:
            for e in edges:
                if e["source_id"] in shown or e["target_id"] in shown:
                    visible |= {e["source_id"], e["target_id"]}
        return {
            "nodes": [{"id": i, "label": str(n.get("name") or i), "type": n.get("type"), "shown": i in visible,
                       "selected": shown is not None and i in shown} for i, n in live.items()],
            "edges": [{"id": str(e["id"]), "source": e["source_id"], "target": e["target_id"],
                       "label": str(e.get("predicate") or ""), "fact": str(e.get("fact") or ""),
                       "current": not (e.get("invalid_at") or e.get("expired_at"))} for e in edges],
        }


async def graph_view(deps: Deps, user_id: str, history: bool = True) -> GraphView:
    view = GraphView()
    cursor: str | None = None
    while len(view.nodes) < MAX_NODES:
        page = await deps.service.list_nodes(user_id, None, PAGE, cursor)
        view.nodes.update({str(n["id"]): dict(n) for n in page.items})
        cursor = page.next_cursor
        if cursor is None:
            break
    view.capped = cursor is not None
    cursor = None
    while len(view.edges) < MAX_EDGES:
        page = await deps.service.list_edges(user_id, None, PAGE, cursor, history)
        view.edges += [dict(e) for e in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    view.capped = view.capped or cursor is not None
    return view
