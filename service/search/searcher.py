"""A search: the retrievers of the table run side by side on one `Query`, their lists fused by weighted
reciprocal rank fusion, the top results read with their memories (docs/retrieval.md)."""

from __future__ import annotations

import asyncio
from array import array
from collections import OrderedDict

from service.ai.embeddings import Embedder
from service.core.domain import check_category, iso
from service.core.metrics import SEARCH_DURATION, timed
from service.core.settings import SearchSettings
from service.schemas.search import SearchRequest, SearchResponse, SearchResult, SearchWindow
from service.search.dense import Dense
from service.search.facts import supporting_facts
from service.search.fusion import fuse
from service.search.graph import GraphRetriever
from service.search.lexical import Lexical
from service.search.results import results
from service.search.retriever import Query, Retrieved, Retriever
from service.search.time_window import TimeWindows
from service.stores.graph import GraphRetrieval
from service.stores.vector import MemoryFilter, VectorStore


def retrievers(search: SearchSettings, vectors: VectorStore, graph: GraphRetrieval, *, graph_timeout_s: float,
               graph_entity_weight: float) -> tuple[Retriever, ...]:
    """The table of retrievers: what a search can run, one entry each. Their order is the fusion's (ties and
    `signals` follow it) and the order they start in, after those with `remote_first`; the time retriever parses
    the query on the event loop, so it stays last."""
    return (
        Dense(vectors, search.weight_dense),
        Lexical(vectors, search.weight_lexical),
        GraphRetriever(vectors, graph, search, timeout_s=graph_timeout_s, entity_weight=graph_entity_weight),
        TimeWindows(vectors, search.weight_time),
    )




EVIDENCE = ("lexical", "graph", "time")  # a word, an entity or a time the query names: not "only by meaning"


def below_floor(out: list[SearchResult], floor: float | None) -> list[SearchResult]:
    """`out` with `below_floor` set on each result found only by meaning (no retriever of EVIDENCE returned it)
    whose dense cosine with the query is under `floor` (or that no retriever scored at all)."""
    if floor is None:
        return out
    for r in out:
        if any(s.retriever in EVIDENCE for s in r.signals):
            continue
        cosine = next((s.score for s in r.signals if s.retriever == "dense"), None)
        r.below_floor = cosine is None or cosine < floor
    return out


class Searcher:
    def __init__(self, search: SearchSettings, vectors: VectorStore, graph: GraphRetrieval, embedder: Embedder, *,
                 graph_timeout_s: float, graph_entity_weight: float, relevance_floor: float | None = None) -> None:
        """`graph_timeout_s`: GRAPH_TIMEOUT_SECONDS; `graph_entity_weight`: GraphRetriever's `entity_weight`;
        `relevance_floor`: the calibrated floor (`below_floor`), None for none."""
        self.settings = search
        self.relevance_floor = relevance_floor
        self.graph_timeout_s = graph_timeout_s
        self.vectors = vectors
        self.graph = graph
        self.embedder = embedder  # a search's: in the API process, no queue of writes before it
        self.retrievers = retrievers(search, vectors, graph, graph_timeout_s=graph_timeout_s,
                                     graph_entity_weight=graph_entity_weight)
        self.names = tuple(r.name for r in self.retrievers)
        self.weights = {r.name: r.weight for r in self.retrievers}
        self.query_vectors: OrderedDict[str, array[float]] = OrderedDict()  # query-embedding LRU

    async def search(self, req: SearchRequest, user_id: str) -> SearchResponse:
        """Each retriever the request asks for (default: all) ranks up to SEARCH_CANDIDATES memories under the
        same filter; every result names the retrievers that returned it and at what rank (`signals`), and `score`
        is the fused score. The query's embedding starts at once, beside the retrievers."""
        categories = tuple(check_category(c).name for c in req.categories) if req.categories else None
        flt = MemoryFilter(user_id=user_id, project_id=req.project_id, categories=categories,
                           after=iso(req.after) if req.after else None, before=iso(req.before) if req.before else None,
                           active_only=not req.include_superseded)  # superseded memories are history
        use = set(req.retrievers or self.names)
        run = [r for r in self.retrievers if r.name in use]
        embedding = (asyncio.ensure_future(self.query_vector(req.query)) if any(r.uses_vector for r in run)
                     else None)
        q = Query(req.query, user_id, req.project_id, flt, max(self.settings.candidates, req.limit),
                  self.query_vector, embedding)
        with timed(SEARCH_DURATION, retriever="fused"):
            try:
                # The graph's query goes out before the vector store's calls, which hold the GIL in this process.
                started = {r.name: asyncio.ensure_future(self._retrieve(r, q))
                           for r in sorted(run, key=lambda r: not r.remote_first)}
                found = await asyncio.gather(*(started[r.name] for r in run))
            finally:
                if embedding is not None and not embedding.done():
                    embedding.cancel()
            lists = {r.name: f.hits for r, f in zip(run, found, strict=True) if f.hits}
            fused = fuse(lists, self.weights, self.settings.rrf_k)
            out = below_floor(await results(self.vectors, fused, req.limit, req.collapse), self.relevance_floor)
        window = next((f.window for f in found if f.window is not None), None)
        degraded = [r.name for r, f in zip(run, found, strict=True) if f.degraded]
        facts = None
        if req.include and "facts" in req.include:
            facts = await supporting_facts(self.graph, user_id, req.project_id, out, self.graph_timeout_s)
            if facts is None:
                facts = []
                degraded += [] if "graph" in degraded else ["graph"]
        return SearchResponse(results=out, degraded=degraded, facts=facts,
                              time_window=None if window is None else SearchWindow.of(window))

    async def query_vector(self, query: str) -> list[float]:
        """The query's embedding, from the per-process LRU cache when it was asked before."""
        cache = self.query_vectors
        if query in cache:
            cache.move_to_end(query)
            return cache[query].tolist()
        vector = await self.embedder.embed_query(query)
        if self.settings.query_cache_size:
            cache[query] = array("f", vector)  # 4 bytes a value, not a Python float's 32
            while len(cache) > self.settings.query_cache_size:
                cache.popitem(last=False)
        return vector

    @staticmethod
    async def _retrieve(retriever: Retriever, q: Query) -> Retrieved:
        with timed(SEARCH_DURATION, retriever=retriever.name):
            return await retriever.retrieve(q)
