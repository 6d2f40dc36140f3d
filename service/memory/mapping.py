"""Result mapping: graph facts as the API answers them (search results: service/search/results.py)."""

from __future__ import annotations

from service.core.domain import Scope
from service.schemas.search import GraphFactOut
from service.stores.graph import GraphFact, scope_of_group


def fact_out(f: GraphFact) -> GraphFactOut:
    scope, project_id = scope_of_group(f.group_id)
    return GraphFactOut(
        id=f.id, fact=f.fact, predicate=f.predicate, source=f.source, target=f.target, scope=Scope(scope),
        project_id=project_id, valid_at=f.valid_at, invalid_at=f.invalid_at, expired_at=f.expired_at,
        memory_ids=f.memory_ids, score=f.score,
    )
