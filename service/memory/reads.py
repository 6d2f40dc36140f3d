"""Reads: a memory, a task's status, listings, context, merged search and graph search and listings."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from array import array
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

import structlog

from service.domain import CATEGORIES, Memory, check_category, iso
from service.errors import DependencyUnavailable
from service.memory.curation import MemoryCuration
from service.memory.fusion import Fused, fuse
from service.memory.mapping import fact_out, memory_result
from service.metrics import OUTBOX_DEPTH, QUEUE_DEPTH, QUEUE_OLDEST, SEARCH_DURATION, timed
from service.schemas import (
    ContextGroup,
    ContextResponse,
    GraphSearchRequest,
    GraphSearchResponse,
    MemoryPage,
    MemoryRecord,
    SearchRequest,
    SearchResponse,
    SearchResult,
    SearchWindow,
    TaskResponse,
    WritePathHealth,
)
from service.stores.graph import (
    Page,
    groups_for,
)
from service.stores.vector import MemoryFilter, RankRequest
from service.timephrases import EventRelation, TimeWindow, event_window, find_event_relation, find_time_window

log = structlog.get_logger(__name__)
_T = TypeVar("_T")
RETRIEVERS = ("dense", "lexical", "graph", "time")
Ranked = list[tuple[str, float]]  # a retriever's (memory id, its own score), best first
DENSE_DEPTH = 2  # the graph retriever reads its candidates' cosine top DENSE_DEPTH * SEARCH_CANDIDATES


def _narrow(flt: MemoryFilter, window: TimeWindow | None) -> MemoryFilter | None:
    """`flt` within the query's time window; None when there is no window or the two do not overlap."""
    if window is None:
        return None
    after = max(filter(None, [flt.after, iso(window.start)]), key=lambda t: datetime.fromisoformat(t))
    before = min(filter(None, [flt.before, iso(window.end)]), key=lambda t: datetime.fromisoformat(t))
    if datetime.fromisoformat(after) >= datetime.fromisoformat(before):
        return None
    return replace(flt, after=after, before=before)



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


class MemoryReads(MemoryCuration):
    async def get_memory(self, memory_id: str, user_id: str | None) -> MemoryRecord:
        [memory] = await self._existing([memory_id], user_id)
        return MemoryRecord.of(memory)


    async def task_status(self, task_id: str, owner: str | None) -> TaskResponse:
        """A task's status; a task of another user than `owner` (when given) is unknown (404)."""
        return await self.tasks.status(task_id, owner)


    async def list_memories(
        self,
        user_id: str,
        *,
        scope: str | None = None,
        category: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        flt = self._list_filter(user_id, scope, category, project_id, agent_id, all_scopes=True)
        page, next_cursor = await self.vectors.scroll(flt, limit, cursor)
        return MemoryPage(memories=[MemoryRecord.of(m) for m in page], next_cursor=next_cursor)

    async def context(self, user_id: str, project_id: str | None, per_category: int = 200) -> ContextResponse:
        """The user's global memories plus the project's, grouped by category (in the order of CATEGORIES),
        oldest first within a category."""
        flt = MemoryFilter(user_id=user_id, project_id=project_id)
        memories: list[Memory] = []
        cursor: str | None = None
        for _ in range(100):  # bounded: 100 pages of 500
            page, cursor = await self.vectors.scroll(flt, 500, cursor)
            memories += page
            if cursor is None:
                break
        groups: dict[str, list[Memory]] = {}
        for m in memories:
            groups.setdefault(m.category, []).append(m)
        ordered = [
            ContextGroup(
                category=name,
                group=CATEGORIES[name].group,
                memories=[MemoryRecord.of(m) for m in sorted(groups[name], key=lambda m: (m.created_at, m.id))][
                    :per_category
                ],
            )
            for name in CATEGORIES
            if name in groups
        ]
        return ContextResponse(user_id=user_id, project_id=project_id, categories=ordered, total=len(memories))


    # ------------------------------------------------------------------ reads

    async def search(self, req: SearchRequest, user_id: str) -> SearchResponse:
        """Hybrid search (docs/retrieval.md): the dense, lexical, graph and time retrievers each rank up to
        SEARCH_CANDIDATES memories under the same filter; weighted reciprocal rank fusion orders them. Every
        result names the retrievers that returned it and at what rank (`signals`); `score` is the fused
        score. The graph retriever starts at once, beside the query's embedding, and is bounded by
        GRAPH_TIMEOUT_SECONDS: past it, or with Neo4j down, the answer says degraded=["graph"]."""
        categories = tuple(check_category(c).name for c in req.categories) if req.categories else None
        flt = MemoryFilter(user_id=user_id, project_id=req.project_id, categories=categories,
                           after=iso(req.after) if req.after else None, before=iso(req.before) if req.before else None)
        use = set(req.retrievers or RETRIEVERS)
        n = max(self.settings.search_candidates, req.limit)
        vector: asyncio.Future[list[float]] | None = (
            asyncio.ensure_future(self._query_vector(req.query)) if use & {"dense", "time", "graph"} else None)
        window: TimeWindow | None = None

        async def lexical() -> Ranked:
            with timed(SEARCH_DURATION, retriever="lexical"):
                [hits] = await self.vectors.rank([RankRequest(flt, n, text=req.query)])
                return hits

        async def dense_and_time() -> tuple[Ranked, Ranked]:
            # The time phrase is parsed here, once the graph query, the embedding and the lexical search have
            # started (dateparser costs 0.2-5 ms of pure Python, up to ~25 ms when it finds a date).
            nonlocal window
            window = find_time_window(req.query) if "time" in use else None
            relation = find_event_relation(req.query) if "time" in use and window is None else None
            if relation is not None:
                window = await self._event_window(relation, flt)
            narrowed = _narrow(flt, window)
            wanted = ([flt] if "dense" in use else []) + ([narrowed] if narrowed is not None else [])
            if vector is None or not wanted:
                return [], []
            v = await vector
            requests = [RankRequest(f, n, vector=v) for f in wanted]
            with timed(SEARCH_DURATION, retriever="dense"), (
                    timed(SEARCH_DURATION, retriever="time") if narrowed is not None else contextlib.nullcontext()):
                answers = await self.vectors.rank(requests)  # dense and time in one store call
            return (answers[0] if "dense" in use else []), (answers[-1] if narrowed is not None else [])

        async def graph() -> tuple[Ranked, list[str]]:
            with timed(SEARCH_DURATION, retriever="graph"):
                try:
                    async with asyncio.timeout(self.settings.graph_timeout_seconds):
                        proposal = await self.graph.propose_memories(
                            user_id, groups_for(req.project_id), req.query, self.settings.graph_candidates)
                except (DependencyUnavailable, TimeoutError) as exc:
                    log.warning("graph_search_degraded", error=str(exc) or "timeout")
                    return [], ["graph"]
                if not proposal.memories or vector is None:
                    return [], []
                rest = without_names(req.query, proposal.names)
                v = await (vector if rest == req.query or not rest else self._query_vector(rest))
                return await self._rank_proposed(proposal.memories, v, rest or req.query, flt, n), []

        async def nothing() -> Ranked:
            return []

        async def no_graph() -> tuple[Ranked, list[str]]:
            return [], []

        async def no_vectors() -> tuple[Ranked, Ranked]:
            return [], []

        with timed(SEARCH_DURATION, retriever="fused"):
            try:
                # gather starts them in this order: the graph's query and the lexical thread first, the parse last
                (graph_hits, degraded), lexical_hits, (dense_hits, time_hits) = await asyncio.gather(
                    graph() if "graph" in use else no_graph(),
                    lexical() if "lexical" in use else nothing(),
                    dense_and_time() if use & {"dense", "time"} else no_vectors(),
                )
            finally:
                if vector is not None and not vector.done():
                    vector.cancel()
            lists = {"dense": dense_hits, "lexical": lexical_hits, "graph": graph_hits, "time": time_hits}
            fused = fuse({name: hits for name, hits in lists.items() if hits}, self._weights(), self.settings.rrf_k)
            results = await self._results(fused, req.limit)
        response = SearchResponse(results=results, degraded=degraded,
                                  time_window=None if window is None else SearchWindow.of(window))
        if req.trace:
            response.trace_id = self.trace_search(req, user_id, response)
        return response

    async def warm_up(self) -> None:
        """Run the search once before the first request: Neo4j plans a statement on its first run (the graph
        retriever's is long), dateparser loads its data on its first parse, and searches arriving together on a
        fresh service each waited for both: past GRAPH_TIMEOUT_SECONDS under a write load (12 degraded searches
        in the first second of a soak on a fresh stack). It searches for a user id that API keys cannot name
        (`_warm-up`: ids start with a letter or digit), so no tenant's data is read; a failure is logged,
        never fatal (the stores were checked at start-up)."""
        t0 = time.perf_counter()
        try:
            for query in ("What did Warm Up plan the week before the concert?", "the"):
                await self.search(SearchRequest(query=query, limit=1), "_warm-up")
        except Exception as exc:  # a warm-up only: the next search reports for real
            log.warning("search_warm_up_failed", error=str(exc) or type(exc).__name__)
            return
        log.info("search_warmed", ms=round((time.perf_counter() - t0) * 1000, 1))

    async def _event_window(self, relation: EventRelation, flt: MemoryFilter) -> TimeWindow | None:
        """The window of "the week before the concert": the event is dated by the memory whose words best match
        it (BM25 of the event's words among the caller's memories), then the period before or after its day."""
        [hits] = await self.vectors.rank([RankRequest(flt, 1, text=relation.event)])
        found = await self.vectors.get([hits[0][0]]) if hits else []
        if not found or not found[0].occurred_at:
            return None
        return event_window(relation, datetime.fromisoformat(found[0].occurred_at.replace("Z", "+00:00")))

    async def _rank_proposed(self, proposed: Ranked, vector: list[float], text: str, flt: MemoryFilter,
                             n: int) -> Ranked:
        """The graph retriever's order: the memories the graph proposes (those mentioning the entities the query
        names, or one relation away), ranked among themselves by the query without the entities' names (`vector`
        and `text`): entity-scoped hybrid search. Dense: cosine plus GRAPH_ENTITY_WEIGHT times the graph score
        over the best one's (how strongly a memory is tied to the query's entities); lexical: BM25 of `text`
        among them; the two fused by RRF (k = RRF_K) with lexical at GRAPH_LEXICAL_WEIGHT (0 = dense alone).
        Both are one store call, and it returns the cosine top DENSE_DEPTH * n and the BM25 top n, not every
        candidate: the boost (at most GRAPH_ENTITY_WEIGHT) reorders within that depth, and a candidate below
        it hardly ever reaches the top n (LoCoMo turns R@10 0.740 against 0.741 ranking all of them), while
        carrying 1,000 scored points out of the store twice was most of the retriever's tail latency.
        The store answers for the memories it holds and the filter admits only, so a
        memory whose delete has not reached the graph yet is never returned."""
        graph_score = dict(proposed)
        top = max(graph_score.values())
        ids = tuple(graph_score)
        lex_weight = self.settings.graph_lexical_weight
        requests = [RankRequest(flt, min(len(ids), DENSE_DEPTH * n), vector=vector, ids=ids)]
        if lex_weight > 0 and text:
            requests.append(RankRequest(flt, min(len(ids), n), text=text, ids=ids))
        answers = await self.vectors.rank(requests)
        cosines = answers[0]
        weight = self.settings.graph_entity_weight
        scored = [(mid, cos + weight * graph_score[mid] / top) for mid, cos in cosines]
        scored.sort(key=lambda ms: (-ms[1], ms[0]))
        if len(answers) > 1 and answers[1]:
            mixed = fuse({"dense": scored, "lexical": answers[1]}, {"dense": 1.0, "lexical": lex_weight},
                         self.settings.rrf_k)
            return [(f.id, round(f.score, 6)) for f in mixed[:n]]
        return [(mid, round(score, 6)) for mid, score in scored[:n]]

    async def _results(self, fused: list[Fused], limit: int) -> list[SearchResult]:
        """The first `limit` fused hits with their memories: the retrievers rank ids only, so only these
        payloads are read. A memory deleted since it was ranked is skipped and the next one taken."""
        out: list[SearchResult] = []
        start = 0
        for _ in range(3):  # bounded: deletes racing a search are rare
            want = fused[start : start + limit - len(out)]
            if not want:
                break
            found = {m.id: m for m in await self.vectors.get([f.id for f in want])}
            out += [memory_result(found[f.id], f.score, f.signals) for f in want if f.id in found]
            start += len(want)
            if len(out) >= limit:
                break
        return out

    def _weights(self) -> dict[str, float]:
        s = self.settings
        return {"dense": s.search_weight_dense, "lexical": s.search_weight_lexical, "graph": s.search_weight_graph,
                "time": s.search_weight_time}

    async def _query_vector(self, query: str) -> list[float]:
        """The query's embedding, from the per-process LRU cache when it was asked before."""
        cache = self.query_vectors
        if query in cache:
            cache.move_to_end(query)
            return cache[query].tolist()
        vector = await self.query_embedder.embed_query(query)
        if self.settings.query_cache_size:
            cache[query] = array("f", vector)  # 4 bytes a value, not a Python float's 32
            while len(cache) > self.settings.query_cache_size:
                cache.popitem(last=False)
        return vector

    async def graph_search(self, req: GraphSearchRequest, user_id: str) -> GraphSearchResponse:
        """Graph facts only; unlike /v1/search a graph outage is an error (503), not a degradation."""
        facts = await self.graph.search_facts(
            user_id, groups_for(req.project_id), req.query, req.limit, req.include_history
        )
        return GraphSearchResponse(results=[fact_out(f) for f in facts])


    async def list_nodes(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> Page:
        return await self.graph.list_nodes(user_id, groups_for(project_id) if project_id else None, limit, cursor)

    async def list_edges(
        self, user_id: str, project_id: str | None, limit: int, cursor: str | None, include_history: bool
    ) -> Page:
        groups = groups_for(project_id) if project_id else None
        return await self.graph.list_edges(user_id, groups, limit, cursor, include_history)

    async def list_episodes(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> Page:
        return await self.graph.list_episodes(user_id, groups_for(project_id) if project_id else None, limit, cursor)

    async def refresh_gauges(self) -> None:
        """Queue, task and outbox gauges, read from Redis when /metrics is scraped."""
        depth, _ = await self.outbox.stats()
        OUTBOX_DEPTH.set(depth)
        QUEUE_DEPTH.set(await self.tasks.queued_jobs())
        QUEUE_OLDEST.set(await self.tasks.oldest_pending_age_s())

    async def write_path_stats(self) -> WritePathHealth:
        """The write path's backlog for /health (Redis must be up)."""
        depth, oldest = await self.outbox.stats()
        stats = await self.tasks.stats()
        return WritePathHealth(
            outbox_depth=depth, outbox_oldest_age_s=oldest, pending_tasks=await self.tasks.pending_count(),
            graph_transient_retries=stats.get("graph_transient_retries", 0),
            deadlock_retries=stats.get("deadlock_retries", 0),
        )
