"""The table of retrievers (service/search/searcher.py) is what the API names."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from service.core.settings import Settings
from service.identity.rules import NameRules
from service.memory.currency import NEWER
from service.schemas.search import SearchRequest, Signal
from service.search.searcher import retrievers
from service.stores.neo4j.store import Neo4jGraphStore
from service.stores.qdrant_edge import EdgeVectorStore


async def test_signals_and_the_requests_retrievers_name_the_tables_retrievers(tmp_path: Path) -> None:
    """`service/schemas.py` repeats the names as a Literal (the OpenAPI schema lists them): it must list the
    table's, no more and no fewer. Nothing is opened: the stores are only handed to the retrievers."""
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    graph = Neo4jGraphStore("bolt://127.0.0.1:9", "neo4j", None, "memory", 1.0, NameRules())
    try:
        table = retrievers(settings.search, EdgeVectorStore(tmp_path, "c"), graph.reads, graph_timeout_s=1.0,
                           graph_entity_weight=settings.calibration.graph_entity)
    finally:
        await graph.close()
    names = tuple(r.name for r in table)
    assert len(set(names)) == len(names)
    # signals name the table's retrievers and the current-first pass after the search (memory/currency.py: NEWER)
    assert set(get_args(Signal.model_fields["retriever"].annotation)) == set(names) | {NEWER}
    [listed, _none] = get_args(SearchRequest.model_fields["retrievers"].annotation)
    assert set(get_args(get_args(listed)[0])) == set(names)
    assert {r.name: r.weight for r in table} == {
        "dense": settings.search.weight_dense, "lexical": settings.search.weight_lexical,
        "graph": settings.search.weight_graph, "time": settings.search.weight_time}
    # Only the graph's first step is a query to another process: it starts first (searcher.py).
    assert [r.name for r in table if r.remote_first] == ["graph"]
