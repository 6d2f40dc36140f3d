"""Entity-linked expansion (an experiment, off by default: SEARCH_EXPANSION_WEIGHT 0; docs/retrieval.md "Retrieval
step two: ideas measured alone"): after the first fusion, the memories that share a non-ubiquitous entity with
its EXPANSION_SEEDS best memories (the graph store weighs each shared entity by log(N / df), and an entity that
more than EXPANSION_MAX_SHARE of the user's memories mention links nothing), ranked among themselves by the
query like the graph retriever's candidates, as one more list fused beside the others. Evidence spread over
several memories often names the same rare thing (a pet, a place, a book) as the first one found, which the
question does not name."""

from __future__ import annotations

import asyncio

import structlog

from service.core.errors import DependencyUnavailable
from service.search.fusion import Fused
from service.search.graph import GraphRetriever
from service.search.retriever import Query, Ranked
from service.stores.graph import GraphRetrieval, groups_for

log = structlog.get_logger(__name__)

EXPANSION_SEEDS = 3
EXPANSION_MAX_SHARE = 0.05  # an entity in more than this share of the user's memories is ubiquitous
EXPANSION_CANDIDATES = 300


async def expansion(graph: GraphRetrieval, ranker: GraphRetriever, fused: list[Fused], q: Query,
                    seconds: float) -> Ranked:
    """The linked memories ranked by the query (empty when the first pass found nothing, nothing is linked, or the
    graph store is down or slow: the first pass stands)."""
    seeds = [f.id for f in fused[:EXPANSION_SEEDS]]
    if not seeds:
        return []
    try:
        async with asyncio.timeout(seconds):
            linked = await graph.linked_memories(q.user_id, groups_for(q.project_id), seeds, EXPANSION_CANDIDATES,
                                                 EXPANSION_MAX_SHARE)
    except (DependencyUnavailable, TimeoutError) as exc:
        log.warning("expansion_skipped", error=str(exc) or "timeout")
        return []
    if not linked:
        return []
    return await ranker.rank_proposed(linked, await q.vector(), q.text, q.flt, q.limit)
