"""Result mapping: stored memories and graph facts as the API answers them."""

from __future__ import annotations

from typing import TypeVar

import structlog

from service.domain import Memory, Scope
from service.schemas import GraphFactOut, SearchResult, Signal
from service.stores.graph import (
    GraphFact,
    scope_of_group,
)

log = structlog.get_logger(__name__)
_T = TypeVar("_T")



def memory_result(m: Memory, score: float, signals: dict[str, tuple[int, float]]) -> SearchResult:
    """A fused search hit: the memory, its fused score and each retriever's rank and own score."""
    return SearchResult(
        id=m.id, content=m.content, score=round(score, 6), source="vector", category=m.category, scope=m.scope,
        project_id=m.project_id, created_at=m.created_at, agent_id=m.agent_id, metadata=m.metadata,
        occurred_at=m.occurred_at or m.created_at, source_message_ids=m.source_message_ids,
        signals=[Signal(retriever=name, rank=rank, score=round(own, 6))  # type: ignore[arg-type]
                 for name, (rank, own) in sorted(signals.items(), key=lambda kv: kv[1][0])],
    )

def fact_out(f: GraphFact) -> GraphFactOut:
    scope, project_id = scope_of_group(f.group_id)
    return GraphFactOut(
        id=f.id, fact=f.fact, predicate=f.predicate, source=f.source, target=f.target, scope=Scope(scope),
        project_id=project_id, valid_at=f.valid_at, invalid_at=f.invalid_at, expired_at=f.expired_at,
        memory_ids=f.memory_ids, score=f.score,
    )
