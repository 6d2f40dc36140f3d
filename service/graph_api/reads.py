"""Reads of the graph as an API: the facts about one entity (by id or name, through aliases and merges) and
structural queries over typed relations (docs/graph.md)."""

from __future__ import annotations

import json
from typing import Any

from service.core.domain import iso
from service.core.errors import DomainError, NotFound
from service.graph_api.vocabulary import predicate_forms, type_forms
from service.schemas.graph_api import (
    CommunityPage,
    EntityFactsPage,
    EntityInfo,
    FactItem,
    FactPage,
    GraphQuery,
    community_item,
    entity_summary,
)
from service.stores.facts import CommunityStore, FactStore
from service.stores.graph import groups_for


def _item(fact: dict[str, Any], subject: dict[str, Any], obj: dict[str, Any]) -> FactItem:
    current = fact.get("invalid_at") is None and fact.get("expired_at") is None
    return FactItem(id=str(fact["id"]), subject=entity_summary(subject), predicate=str(fact.get("predicate") or ""),
                    object=entity_summary(obj), fact=str(fact.get("fact") or ""), valid_at=fact.get("valid_at"),
                    invalid_at=fact.get("invalid_at"), expired_at=fact.get("expired_at"), current=current,
                    confidence=fact.get("confidence"), memory_ids=list(fact.get("memory_ids") or []),
                    group_id=str(fact.get("group_id") or "global"))


def _attributes(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class GraphFacts:
    def __init__(self, graph: FactStore, communities: CommunityStore) -> None:
        self.graph = graph
        self.community_store = communities

    async def entity_facts(self, user_id: str, *, entity_id: str | None, name: str | None, project_id: str | None,
                           include_history: bool, limit: int, cursor: str | None) -> EntityFactsPage:
        if (entity_id is None) == (name is None):
            raise DomainError("give an entity id or a name")
        found = await self.graph.find_entity(user_id, groups_for(project_id), entity_id=entity_id, name=name)
        if found is None:
            raise NotFound(f"no entity '{entity_id or name}'")
        rows, next_cursor = await self.graph.entity_facts(user_id, [str(found["id"])], include_history=include_history,
                                                           limit=limit, cursor=cursor)
        me = {"id": found["id"], "name": found.get("name"), "type": found.get("type")}
        items = [_item(r["fact"], me, r["other"]) if r["out"] else _item(r["fact"], r["other"], me) for r in rows]
        entity = EntityInfo(id=str(found["id"]), name=str(found.get("name") or ""),
                            type=str(found.get("type") or "thing"), aliases=list(found.get("aliases") or []),
                            group_id=str(found.get("group_id") or "global"), description=found.get("description"),
                            attributes=_attributes(found.get("attributes")))
        return EntityFactsPage(entity=entity, items=items, next_cursor=next_cursor)

    async def query(self, req: GraphQuery, user_id: str) -> FactPage:
        """A named end is resolved like a fact's read (name, alias, merges); a name the graph does not hold
        matches nothing."""
        groups = groups_for(req.project_id)
        ends: dict[str, list[str] | None] = {"subject": None, "object": None}
        for what, name in (("subject", req.subject), ("object", req.object)):
            if name is not None:
                found = await self.graph.find_entity(user_id, groups, name=name)
                if found is None:
                    return FactPage(items=[], next_cursor=None)
                ends[what] = [str(found["id"])]
        as_of = iso(req.as_of) if req.as_of is not None else None
        rows, next_cursor = await self.graph.query_facts(
            user_id, groups, subjects=ends["subject"], objects=ends["object"],
            predicates=predicate_forms(req.predicate) if req.predicate else None,
            subject_types=type_forms(req.subject_type) if req.subject_type else None,
            object_types=type_forms(req.object_type) if req.object_type else None,
            as_of=as_of, limit=req.limit, cursor=req.cursor)
        return FactPage(items=[_item(r["fact"], r["subject"], r["object"]) for r in rows], next_cursor=next_cursor)

    async def communities(self, user_id: str, limit: int, cursor: str | None) -> CommunityPage:
        rows, next_cursor = await self.community_store.list_communities(user_id, limit, cursor)
        return CommunityPage(items=[community_item(r) for r in rows], next_cursor=next_cursor)


