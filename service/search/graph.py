"""The graph retriever: the memories that mention the entities the query names (or one relation away from them),
proposed by the graph store and ranked among themselves by the vector store."""

from __future__ import annotations

import asyncio
import re

import structlog

from service.core.errors import DependencyUnavailable
from service.core.settings import SearchSettings
from service.search.fusion import fuse
from service.search.retriever import Query, Ranked, Retrieved
from service.stores.graph import GraphRetrieval, groups_for
from service.stores.vector import MemoryFilter, RankRequest, VectorStore

log = structlog.get_logger(__name__)

DENSE_DEPTH = 2  # the re-rank reads its candidates' cosine top DENSE_DEPTH * the list length


def without_names(query: str, names: list[str]) -> str:
    """The query without the entity names it uses as names (whole words written with a capital, a possessive
    with its name): what the graph retriever ranks an entity's memories by, since every one of them is already
    about that entity. A matched name the query writes in lower case ("identity") is an ordinary word: kept."""
    rest = query
    for name in sorted(names, key=len, reverse=True):
        if name.strip():
            pattern = rf"(?<!\w){re.escape(name.strip())}(?:['\u2019]s?)?(?!\w)"
            rest = re.sub(pattern, lambda m: " " if m.group(0)[:1].isupper() else m.group(0), rest,
                          flags=re.IGNORECASE)
    return " ".join(rest.split())


def named_in(query: str, names: list[str]) -> list[str]:
    """The matched names the query writes as names (a whole word with a capital, a possessive with its name), each
    once (case aside), a name inside a longer one of them left out ("Jon" in "Jon Smith")."""
    found: list[str] = []
    for name in sorted({n.strip() for n in names if n.strip()}, key=lambda n: (-len(n), n)):
        pattern = rf"(?<!\w){re.escape(name)}(?:['\u2019]s?)?(?!\w)"
        written = any(m.group(0)[:1].isupper() for m in re.finditer(pattern, query, flags=re.IGNORECASE))
        inside = any(name.casefold() in longer.casefold().split() or name.casefold() == longer.casefold()
                     for longer in found)
        if written and not inside:
            found.append(name)
    return found


class GraphRetriever:
    """Bounded by GRAPH_TIMEOUT_SECONDS: past it, or with the graph store down, the search answers without it and
    says so (degraded)."""

    name = "graph"
    uses_vector = True
    remote_first = True

    def __init__(self, vectors: VectorStore, graph: GraphRetrieval, search: SearchSettings, *, timeout_s: float,
                 entity_weight: float) -> None:
        """`timeout_s`: GRAPH_TIMEOUT_SECONDS; `entity_weight`: the graph score's weight beside the cosine
        (GRAPH_ENTITY_WEIGHT, else the embedding model's calibrated value)."""
        self.vectors = vectors
        self.graph = graph
        self.search = search
        self.timeout_s = timeout_s
        self.entity_weight = entity_weight
        self.weight = search.weight_graph

    async def retrieve(self, q: Query) -> Retrieved:
        try:
            async with asyncio.timeout(self.timeout_s):
                proposal = await self.graph.propose_memories(
                    q.user_id, groups_for(q.project_id), q.text, self.search.graph_candidates)
        except (DependencyUnavailable, TimeoutError) as exc:
            log.warning("graph_search_degraded", error=str(exc) or "timeout")
            return Retrieved(degraded=True)
        if not proposal.memories:
            return Retrieved()
        rest = without_names(q.text, proposal.names)
        vector = await (q.vector() if rest == q.text or not rest else q.embed(rest))
        return Retrieved(await self.rank_proposed(proposal.memories, vector, rest or q.text, q.flt, q.limit))

    async def rank_proposed(self, proposed: Ranked, vector: list[float], text: str, flt: MemoryFilter,
                            n: int) -> Ranked:
        """The memories the graph proposes ranked among themselves by the query without the entities' names
        (`vector` and `text`): entity-scoped hybrid search. Dense: cosine plus GRAPH_ENTITY_WEIGHT times the graph
        score over the best one's (how strongly a memory is tied to the query's entities); lexical: BM25 of `text`
        among them; the two fused by RRF (k = RRF_K) with lexical at GRAPH_LEXICAL_WEIGHT (0 = dense alone).
        Both are one store call, which returns the cosine top DENSE_DEPTH * n and the BM25 top n rather than every
        candidate: the boost (at most GRAPH_ENTITY_WEIGHT) reorders within that depth, a candidate below it hardly
        ever reaches the top n, and carrying every scored candidate out of the store would cost more than the
        rest of the retriever (docs/retrieval.md). The store answers for the memories it holds and the filter
        admits only, so a memory whose delete has not reached the graph yet is never returned."""
        graph_score = dict(proposed)
        top = max(graph_score.values())
        ids = tuple(graph_score)
        lex_weight = self.search.graph_lexical_weight
        requests = [RankRequest(flt, min(len(ids), DENSE_DEPTH * n), vector=vector, ids=ids)]
        if lex_weight > 0 and text:
            requests.append(RankRequest(flt, min(len(ids), n), text=text, ids=ids))
        answers = await self.vectors.rank(requests)
        cosines = answers[0]
        weight = self.entity_weight
        scored = [(mid, cos + weight * graph_score[mid] / top) for mid, cos in cosines]
        scored.sort(key=lambda ms: (-ms[1], ms[0]))
        if len(answers) > 1 and answers[1]:
            mixed = fuse({"dense": scored, "lexical": answers[1]}, {"dense": 1.0, "lexical": lex_weight},
                         self.search.rrf_k)
            return [(f.id, round(f.score, 6)) for f in mixed[:n]]
        return [(mid, round(score, 6)) for mid, score in scored[:n]]
