"""The graph's reads (`RetrievalGraph`): fact and memory retrieval (the search's graph retriever, expansion, supporting
facts), listings and exports."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.stores.graph import GraphFact, GraphProposal, RowPage
from service.stores.neo4j import cypher_portability, cypher_reads, ddl
from service.stores.neo4j.ceiling import Ceiling
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import (
    MAX_NAME_CHARS,
    MAX_PAGE_LIMIT,
    MAX_QUERY_CHARS,
    MAX_SEARCH_LIMIT,
    check_cursor,
    check_groups,
    check_id,
    clamp,
    edge_item,
    fact_of,
    ft_key,
)
from service.stores.neo4j.search import (
    DIRECT_EDGES,
    ENTITY_HITS,
    HUB_DEGREE,
    MAX_CANDIDATES,
    MAX_MENTIONS,
    MEMORIES_PER_ENTITY,
    MEMORIES_PER_NEIGHBOUR,
    NEIGHBOUR_EDGES,
    NEIGHBOURS,
    ONE_HOP_WEIGHT,
    entity_hits,
    fact_score,
    lucene_query,
    lucene_terms,
)


class RetrievalGraph:
    """Fact and memory retrieval, listings and exports, each filtered by the sensitivity ceiling."""

    def __init__(self, executor: Neo4jExecutor) -> None:
        self._exec = executor
        self._ceiling = Ceiling(executor)

    async def search_facts(
        self, user_id: str, groups: list[str], query: str, limit: int, include_history: bool = False
    ) -> list[GraphFact]:
        checked, terms, keys = self._search_scope(user_id, groups, query)
        limit = clamp(limit, MAX_SEARCH_LIMIT)
        if not checked:
            return []
        fact_q = lucene_query(keys, ("fact",), terms, live_only=not include_history) if terms else None
        common: dict[str, Any] = {"user_id": user_id, "groups": checked, "history": include_history}

        async def run(tx: AsyncManagedTransaction) -> tuple[dict[str, float], list[dict[str, Any]],
                                                             list[dict[str, Any]]]:
            hits = await entity_hits(tx, query, terms, keys, common)
            edges: list[dict[str, Any]] = []
            if hits:
                result = await tx.run(cypher_reads.ENTITY_EDGES, hits=list(hits), direct=DIRECT_EDGES,
                                      neighbours=NEIGHBOURS, per_neighbour=NEIGHBOUR_EDGES, hub=HUB_DEGREE, **common)
                edges = await result.data()
            facts: list[dict[str, Any]] = []
            if fact_q:
                result = await tx.run(cypher_reads.FACT_TEXT_HITS, index=ddl.FACT_TEXT_INDEX, lucene=fact_q,
                                      k=max(2 * limit, 20), **common)
                facts = await result.data()
            return hits, edges, facts

        hits, edges, facts = await self._exec.read(run)
        evidence: dict[str, dict[tuple[str, int], float]] = {}
        rows: dict[str, dict[str, Any]] = {}
        for e in edges:
            fact = e["fact"]
            weight = hits.get(str(e["hit"]), 0.0) * (1.0 if e["hop"] == 0 else ONE_HOP_WEIGHT)
            slot = evidence.setdefault(str(fact["id"]), {})
            key = ("entity:" + str(e["hit"]), 0)
            slot[key] = max(slot.get(key, 0.0), weight)
            rows[str(fact["id"])] = fact
        top_fact = max((float(f["score"]) for f in facts), default=0.0)
        for f in facts:
            fact = f["fact"]
            slot = evidence.setdefault(str(fact["id"]), {})
            slot[("fact", 0)] = float(f["score"]) / top_fact if top_fact > 0 else 0.0
            rows[str(fact["id"])] = fact
        now = datetime.now(UTC)
        scored = [
            fact_of(row, fact_score(list(evidence[fid].values()), len(row.get("memory_ids") or []),
                                  row.get("valid_at"), now))
            for fid, row in rows.items()
        ]
        scored.sort(key=lambda f: (-f.score, f.id))
        return (await self._ceiling.keep_facts([f for f in scored if f.score > 0]))[:limit]

    async def propose_memories(self, user_id: str, groups: list[str], query: str, limit: int) -> GraphProposal:
        """The graph retriever (`cypher_reads.MEMORY_RETRIEVER` has the ranking): one statement in one auto-commit
        round trip; Neo4j sums the scores, so only the ranked memories cross the wire."""
        checked, terms, keys = self._search_scope(user_id, groups, query)
        if not checked:
            return GraphProposal([], [])
        params: dict[str, Any] = {
            "user_id": user_id, "groups": checked, "entity_hits": ENTITY_HITS,
            "name_lc": query[:MAX_QUERY_CHARS].strip().casefold()[:MAX_NAME_CHARS],
            "per_entity": min(MEMORIES_PER_ENTITY, clamp(limit, MAX_CANDIDATES)), "neighbours": NEIGHBOURS,
            "per_neighbour": MEMORIES_PER_NEIGHBOUR, "hub": HUB_DEGREE, "max_mentions": MAX_MENTIONS,
            "one_hop": ONE_HOP_WEIGHT, "limit": clamp(limit, MAX_CANDIDATES),
        }
        if terms:
            stmt = cypher_reads.MEMORY_RETRIEVER
            params.update(index=ddl.ENTITY_TEXT_INDEX, lucene=lucene_query(keys, ("name", "aliases"), terms))
        else:
            stmt = cypher_reads.MEMORY_RETRIEVER_EXACT

        answer = await self._exec.read_one(stmt, **params)
        if not answer:
            return GraphProposal([], [])
        names, mids, scores = answer[0]
        rows = [(str(mid), round(float(score), 6)) for mid, score in zip(mids, scores, strict=True)]
        rows = await self._ceiling.keep_memories(rows, lambda ms: ms[0])
        return GraphProposal(sorted(rows, key=lambda ms: (-ms[1], ms[0])),
                             list(dict.fromkeys(str(n) for n in names or [] if n)))

    async def query_entities(self, user_id: str, groups: list[str], query: str) -> list[str]:
        """The ids of the entities the graph retriever starts from for this query (a trace's TOUCHED)."""
        checked, terms, keys = self._search_scope(user_id, groups, query)
        if not checked:
            return []
        common: dict[str, Any] = {"user_id": user_id, "groups": checked, "history": False}

        async def run(tx: AsyncManagedTransaction) -> list[str]:
            return sorted(await entity_hits(tx, query, terms, keys, common))

        found: list[str] = await self._exec.read(run)
        return list(await self._ceiling.keep_entities(found, str))

    @staticmethod
    def _search_scope(user_id: str, groups: list[str], query: str) -> tuple[list[str], list[str], list[str]]:
        """(checked groups, the query's Lucene terms, the caller's full-text tenant keys)."""
        check_id(user_id, "user_id")
        checked = check_groups(groups) or []
        return checked, lucene_terms(query), [ft_key(user_id, g) for g in checked]

    async def _page(
        self, stmt: LiteralString, user_id: str, groups: list[str] | None, limit: int, cursor: str | None,
        history: bool = False,
    ) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")
        params: dict[str, Any] = {
            "user_id": user_id, "groups": check_groups(groups), "cursor": check_cursor(cursor),
            "limit": clamp(limit, MAX_PAGE_LIMIT) + 1, "history": history,
        }

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            return list(await (await tx.run(stmt, **params)).data())

        rows: list[dict[str, Any]] = await self._exec.read(run)
        return rows

    @staticmethod
    def _paged(items: list[dict[str, object]], limit: int) -> RowPage:
        limit = clamp(limit, MAX_PAGE_LIMIT)
        more = len(items) > limit
        items = items[:limit]
        return RowPage(items=items, next_cursor=str(items[-1]["id"]) if more and items else None)

    async def _kept(self, page: RowPage, keep: Any) -> RowPage:
        """A page without what the sensitivity ceiling hides (its cursor unchanged: a page may come out short)."""
        return RowPage(items=await keep(page.items), next_cursor=page.next_cursor)

    async def list_nodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        rows = await self._page(cypher_reads.LIST_NODES, user_id, groups, limit, cursor)
        return await self._kept(self._paged([dict(r["item"]) for r in rows], limit), self._ceiling.keep_entities)

    async def list_edges(
        self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None, include_history: bool = False
    ) -> RowPage:
        rows = await self._page(cypher_reads.LIST_EDGES, user_id, groups, limit, cursor, include_history)
        return await self._kept(self._paged([edge_item(r["fact"]) for r in rows], limit), self._ceiling.keep_facts)

    async def export_facts(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        rows = await self._page(cypher_portability.EXPORT_FACTS, user_id, groups, limit, cursor)
        # `confidence` only where a structured write set it (docs/graph.md)
        return await self._kept(self._paged([{k: v for k, v in r["item"].items() if v is not None or k != "confidence"}
                                             for r in rows], limit), self._ceiling.keep_facts)

    async def facts_of_memories(self, user_id: str, groups: list[str], memory_ids: list[str], limit: int
                                ) -> list[GraphFact]:
        check_id(user_id, "user_id")
        checked = check_groups(groups)
        if not checked or not memory_ids:
            return []
        rows = await self._exec.read_one(cypher_reads.FACTS_OF_MEMORIES, user_id=user_id, groups=checked,
                                         ids=memory_ids, limit=clamp(limit, MAX_SEARCH_LIMIT))
        return [fact_of(dict(r[0])) for r in rows]

    async def retired_by(self, user_id: str, groups: list[str], memory_ids: list[str]) -> dict[str, set[str]]:
        check_id(user_id, "user_id")
        checked = check_groups(groups)
        if not checked or not memory_ids:
            return {}
        rows = await self._exec.read_one(cypher_reads.RETIRED_BY, user_id=user_id, groups=checked, ids=memory_ids)
        successors: dict[str, set[str]] = {}
        live: set[str] = set()
        for memory_id, _edge, stating in rows:
            later = {str(x) for ids in stating for x in ids} - {str(memory_id)}
            if later:
                successors.setdefault(str(memory_id), set()).update(later)
            else:
                live.add(str(memory_id))
        return {mid: later for mid, later in successors.items() if mid not in live}

    async def mentions_of(self, user_id: str, memory_ids: list[str]) -> dict[str, list[str]]:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> dict[str, list[str]]:
            result = await tx.run(cypher_portability.MENTIONS_OF, ids=memory_ids, user_id=user_id)
            return {str(r["memory_id"]): sorted(str(e) for e in r["entity_ids"]) for r in await result.data()}

        found: dict[str, list[str]] = await self._exec.read(run)
        seen = await self._ceiling.visible_memory_ids(found)
        return found if seen is None else {k: v for k, v in found.items() if k in seen}

    async def export_entities(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        rows = await self._page(cypher_portability.EXPORT_ENTITIES, user_id, groups, limit, cursor)
        return await self._kept(self._paged([dict(r["item"]) for r in rows], limit), self._ceiling.keep_entities)

    async def list_episodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        rows = await self._page(cypher_reads.LIST_EPISODES, user_id, groups, limit, cursor)
        return await self._kept(self._paged([dict(r["item"]) for r in rows], limit), self._ceiling.keep_memories)

    async def memory_nodes(self, user_id: str, memory_ids: list[str]) -> list[dict[str, Any]]:
        """The user's (:Memory) nodes with these ids (deleted ones too, with `deleted_at`)."""
        check_id(user_id, "user_id")
        ids = [check_id(i, "memory id") for i in memory_ids]

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(cypher_reads.MEMORY_NODES, user_id=user_id, ids=ids)
            return [dict(r["item"]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        return list(await self._ceiling.keep_memories(rows))

    async def memory_users(self, limit: int = 100_000) -> list[str]:
        async def run(tx: AsyncManagedTransaction) -> list[str]:
            result = await tx.run("MATCH (m:Memory) WHERE m.user_id IS NOT NULL "
                                  "RETURN DISTINCT m.user_id AS user_id LIMIT $limit", limit=limit)
            return [str(r["user_id"]) for r in await result.data()]

        users: list[str] = await self._exec.read(run)
        return users
