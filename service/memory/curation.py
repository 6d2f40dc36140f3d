"""Entity curation (docs/identity.md): the duplicate review queue, merges and unmerges, and graph statistics.
The Cypher is in service/stores/neo4j/curation.py."""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from service.core.domain import now_iso
from service.schemas.curation import (
    DuplicatePage,
    DuplicatePair,
    EntityCard,
    EntityChange,
    GraphStats,
    MergeRequest,
    ReviewRequest,
    SameAsCounts,
)
from service.stores.graph import groups_for

log = structlog.get_logger(__name__)


class CurationGraph(Protocol):
    async def list_duplicates(self, user_id: str, groups: list[str] | None, limit: int,
                              cursor: str | None) -> tuple[list[dict[str, Any]], str | None]: ...

    async def review_duplicate(self, user_id: str, source_id: str, target_id: str, confirm: bool,
                               reviewer: str | None, now: str) -> dict[str, Any]: ...

    async def merge_entities(self, user_id: str, source_id: str, target_id: str, now: str,
                             reviewer: str | None = None) -> dict[str, Any]: ...

    async def unmerge_entity(self, user_id: str, entity_id: str, now: str) -> dict[str, Any]: ...

    async def graph_stats(self, user_id: str, groups: list[str] | None, now: str) -> dict[str, int]: ...


class Curation:
    def __init__(self, graph: CurationGraph) -> None:
        self.graph = graph

    async def list_duplicates(self, user_id: str, project_id: str | None, limit: int,
                              cursor: str | None) -> DuplicatePage:
        rows, next_cursor = await self.graph.list_duplicates(
            user_id, groups_for(project_id) if project_id else None, limit, cursor)
        items = [DuplicatePair(source=_card(r["source"]), target=_card(r["target"]),
                               **{k: r["pair"].get(k) for k in ("score", "match_type", "reason", "group_id",
                                                                 "created_at")})
                 for r in rows]
        return DuplicatePage(items=items, next_cursor=next_cursor)

    async def review_duplicate(self, req: ReviewRequest, user_id: str) -> EntityChange:
        change = await self.graph.review_duplicate(user_id, req.source_id, req.target_id, req.confirm,
                                                   req.reviewer or user_id, now_iso())
        log.info("duplicate_reviewed", user_id=user_id, **change)
        return EntityChange(**change)

    async def merge_entities(self, req: MergeRequest, user_id: str) -> EntityChange:
        change = await self.graph.merge_entities(user_id, req.source_id, req.target_id, now_iso())
        log.info("entities_merged", user_id=user_id, **change)
        return EntityChange(**change)

    async def unmerge_entity(self, entity_id: str, user_id: str) -> EntityChange:
        change = await self.graph.unmerge_entity(user_id, entity_id, now_iso())
        log.info("entity_unmerged", user_id=user_id, **change)
        return EntityChange(**change)

    async def graph_stats(self, user_id: str, project_id: str | None) -> GraphStats:
        s = await self.graph.graph_stats(user_id, groups_for(project_id) if project_id else None, now_iso())
        return GraphStats(memories=s["memories"], entities=s["entities"], merged_entities=s["merged"],
                          live_facts=s["live"], expired_facts=s["expired"], traces=s["traces"],
                          same_as=SameAsCounts(pending=s["pending"], confirmed=s["confirmed"],
                                               rejected=s["rejected"]))


def _card(row: dict[str, Any]) -> EntityCard:
    return EntityCard.model_validate({**row, "aliases": list(row.get("aliases") or [])})
