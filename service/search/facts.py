"""`include: ["facts"]`: the graph facts that support a search's returned memories (the v1 API's graph results),
beside the memories rather than in their slots, so they cost no recall."""

from __future__ import annotations

import asyncio

import structlog

from service.core.errors import DependencyUnavailable
from service.schemas.search import SearchResult, SupportingFact
from service.stores.graph import GraphRetrieval, groups_for

log = structlog.get_logger(__name__)

MAX_FACTS = 50


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip(".")


async def supporting_facts(graph: GraphRetrieval, user_id: str, project_id: str | None, out: list[SearchResult],
                           timeout_s: float) -> list[SupportingFact] | None:
    """The live facts the returned memories (and those folded into them) support, each once, in the order of the
    first result that supports it; a fact whose text is the content of the memory it came from is left out (the
    memory already says it). None when the graph store is down or slower than GRAPH_TIMEOUT_SECONDS."""
    rank: dict[str, int] = {}
    content: dict[str, str] = {}
    for i, r in enumerate(out):
        rank.setdefault(r.id, i)
        content[r.id] = _plain(r.content)
        for folded in r.also:
            rank.setdefault(folded.id, i)
    if not rank:
        return []
    try:
        async with asyncio.timeout(timeout_s):
            found = await graph.facts_of_memories(user_id, groups_for(project_id), list(rank), MAX_FACTS)
    except (DependencyUnavailable, TimeoutError) as exc:
        log.warning("search_facts_degraded", error=str(exc) or "timeout")
        return None
    facts: list[tuple[int, SupportingFact]] = []
    for f in found:
        mine = [mid for mid in f.memory_ids if mid in rank]
        if not mine or any(content.get(mid) == _plain(f.fact) for mid in mine):
            continue
        facts.append((min(rank[mid] for mid in mine), SupportingFact(
            id=f.id, fact=f.fact, source_entity=f.source, predicate=f.predicate, target_entity=f.target,
            valid_at=f.valid_at, invalid_at=f.invalid_at, memory_ids=sorted(mine, key=lambda mid: rank[mid]))))
    facts.sort(key=lambda rf: (rf[0], rf[1].id))
    return [f for _, f in facts]
