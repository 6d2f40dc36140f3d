"""Result mapping: stored memories and graph facts as the API answers them."""

from __future__ import annotations

from typing import TypeVar

import structlog

from service.domain import Scope
from service.schemas import GraphFactOut, SearchResult
from service.stores.graph import (
    GraphFact,
    scope_of_group,
)
from service.stores.vector import ScoredMemory

log = structlog.get_logger(__name__)
_T = TypeVar("_T")



def vector_result(h: ScoredMemory) -> SearchResult:
    m = h.memory
    return SearchResult(
        id=m.id, content=m.content, score=h.score, source="vector", category=m.category, scope=m.scope,
        project_id=m.project_id, created_at=m.created_at, agent_id=m.agent_id, metadata=m.metadata,
    )

def graph_result(f: GraphFact) -> SearchResult:
    scope, project_id = scope_of_group(f.group_id)
    return SearchResult(
        id=f.id, content=f.fact, score=f.score, source="graph", category=None, scope=Scope(scope),
        project_id=project_id, created_at=f.created_at, source_entity=f.source, target_entity=f.target,
        predicate=f.predicate, valid_at=f.valid_at, invalid_at=f.invalid_at, memory_ids=f.memory_ids,
    )

def fact_out(f: GraphFact) -> GraphFactOut:
    scope, project_id = scope_of_group(f.group_id)
    return GraphFactOut(
        id=f.id, fact=f.fact, predicate=f.predicate, source=f.source, target=f.target, scope=Scope(scope),
        project_id=project_id, valid_at=f.valid_at, invalid_at=f.invalid_at, expired_at=f.expired_at,
        memory_ids=f.memory_ids, score=f.score,
    )
