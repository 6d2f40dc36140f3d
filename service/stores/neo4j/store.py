"""Neo4j backend of the GraphStore Protocol (async driver, `execute_write`/`execute_read`). The statements are
in cypher.py, rows and ids in rows.py, full-text search helpers in search.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, LiteralString

import structlog
from neo4j import (
    READ_ACCESS,
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    NotificationDisabledClassification,
)
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable, TransientError

from service.domain import Memory
from service.errors import DependencyUnavailable, DomainError
from service.identity import NameVectors, keys_of
from service.stores.graph import SINGLE_VALUED_PREDICATES, GraphFact, GraphProposal, MemoryLinks, Page
from service.stores.neo4j import cypher, resolution
from service.stores.neo4j.curation import GraphCuration
from service.stores.neo4j.resolution import resolve
from service.stores.neo4j.rows import (
    MAX_ALIASES,
    MAX_NAME_CHARS,
    MAX_PAGE_LIMIT,
    MAX_QUERY_CHARS,
    MAX_SEARCH_LIMIT,
    REMOVE_BATCH,
    check_cursor,
    check_groups,
    check_id,
    clamp,
    edge_item,
    entity_name,
    fact_of,
    ft_key,
    iso_utc,
    link_rows,
    memory_row,
    utc_now,
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
    fact_score,
    lucene_query,
    lucene_terms,
)

log = structlog.get_logger(__name__)
_QUIET_READS = [NotificationDisabledClassification.UNRECOGNIZED]


async def apply_links(tx: AsyncManagedTransaction, graph: dict[str, list[dict[str, Any]]], now: str,
                      resolver: NameVectors | None) -> None:
    """Resolve the new entities (when a gate is configured), MERGE entities, mentions and relations, then let
    single-valued facts replace older ones."""
    if resolver is not None and graph["entities"]:
        await resolve(tx, resolver, graph, now)
    if graph["entities"]:
        await (await tx.run(cypher.UPSERT_ENTITIES, rows=graph["entities"], max_aliases=MAX_ALIASES)).consume()
    if graph.get("same_as"):
        await (await tx.run(resolution.SAME_AS, rows=graph["same_as"])).consume()
    if graph["mentions"]:
        await (await tx.run(cypher.UPSERT_MENTIONS, rows=graph["mentions"])).consume()
    if graph["relations"]:
        await (await tx.run(cypher.UPSERT_RELATIONS, rows=graph["relations"])).consume()
    single = sorted(
        ({"source_id": r["source_id"], "id": r["id"], "valid_at": str(r["valid_at"])} for r in graph["relations"]
         if r["predicate"] in SINGLE_VALUED_PREDICATES),
        key=lambda r: r["valid_at"],
    )
    if single:  # oldest first, one round trip
        await (await tx.run(cypher.SUPERSEDE, rows=single, now=now)).consume()



class Neo4jGraphStore(GraphCuration):
    name = "neo4j"

    def __init__(self, uri: str, user: str, password: str | None, database: str, timeout: float,
                 resolver: NameVectors | None = None) -> None:
        auth = (user, password) if password else None
        self._driver: AsyncDriver = AsyncGraphDatabase.driver(
            uri,
            auth=auth,
            connection_timeout=timeout,
            connection_acquisition_timeout=timeout,
            max_transaction_retry_time=timeout,
            # "property key does not exist" on a fresh graph (merged_into before any merge) is not news
            notifications_disabled_classifications=["UNRECOGNIZED"],
        )
        self._db = database
        self._timeout = timeout
        self._resolver = resolver  # the entity resolution gate; None: one entity per spelling
        self.transient_retries = 0  # transaction functions the driver re-ran on a transient error
        self.deadlock_retries = 0  # ... of which on DeadlockDetected

    async def _write(self, fn: Any, **params: Any) -> Any:
        async def counted(tx: AsyncManagedTransaction, /, **kw: Any) -> Any:
            try:
                return await fn(tx, **kw)
            except TransientError as exc:  # the driver retries the function; we count why
                self.transient_retries += 1
                if "Deadlock" in (exc.code or ""):
                    self.deadlock_retries += 1
                raise

        try:
            async with asyncio.timeout(self._timeout * 6):
                async with self._driver.session(database=self._db) as session:
                    return await session.execute_write(counted, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            if "MemoryPoolOutOfMemoryError" in (exc.code or ""):
                raise  # remove_memories halves its batch on this one
            raise DependencyUnavailable(f"neo4j transient error after the driver's retries: {exc.code}") from exc

    async def _read(self, fn: Any, **params: Any) -> Any:
        try:
            async with asyncio.timeout(self._timeout):
                # No "unrecognized" notifications (a property no node has yet, like deleted_at before the first
                # delete): the service would log each one, with the statement, on every search.
                async with self._driver.session(database=self._db,
                                                notifications_disabled_classifications=_QUIET_READS) as session:
                    return await session.execute_read(fn, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            raise DependencyUnavailable(f"neo4j transient error after the driver's retries: {exc.code}") from exc

    async def _read_one(self, stmt: LiteralString, **params: Any) -> list[tuple[Any, ...]]:
        """One read statement in an auto-commit transaction: one round trip (RUN and PULL pipelined), where a
        managed transaction adds BEGIN and COMMIT (2-3 ms at p50 here). No retry on a transient error: for the
        search's graph retriever that is a degraded answer, not a longer wait. Same errors as `_read`."""
        try:
            async with asyncio.timeout(self._timeout):
                async with self._driver.session(database=self._db, default_access_mode=READ_ACCESS,
                                                notifications_disabled_classifications=_QUIET_READS) as session:
                    result = await session.run(stmt, **params)
                    return [tuple(record.values()) async for record in result]
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            raise DependencyUnavailable(f"neo4j transient error: {exc.code}") from exc

    async def ensure_schema(self) -> None:
        async def run(tx: AsyncManagedTransaction, stmt: LiteralString) -> None:
            await (await tx.run(stmt)).consume()

        for stmt in cypher.SCHEMA + (resolution.schema(self._resolver.dim) if self._resolver else ()):
            try:
                await self._write(run, stmt=stmt)
            except Neo4jError as exc:  # an equivalent index under another name is fine
                if "EquivalentSchemaRule" not in (exc.code or ""):
                    raise
        await self._backfill()

        async def wait(tx: AsyncManagedTransaction, seconds: int) -> None:
            await (await tx.run("CALL db.awaitIndexes($seconds)", seconds=seconds)).consume()

        # full-text indexes populate asynchronously; reads right after start need them online
        try:
            await self._write(wait, seconds=int(self._timeout * 5))
        except Neo4jError as exc:  # a big store may take longer: searches fail until it is online
            log.warning("graph_indexes_not_online_yet", error=str(exc))
        log.info("graph_schema_ready", statements=len(cypher.SCHEMA))

    async def _backfill(self) -> None:
        """Entities and edges written before `ft_key` existed get it, memories before `edge_ids`
        existed get theirs (no-op once done)."""
        select: tuple[tuple[LiteralString, LiteralString], ...] = (
            ("MATCH (e:Entity) WHERE e.ft_key IS NULL "
             "RETURN e.id AS id, coalesce(e.user_id, '') AS user_id, coalesce(e.group_id, '') AS group_id LIMIT 5000",
             "UNWIND $rows AS row MATCH (e:Entity {id: row.id}) SET e.ft_key = row.key"),
            ("MATCH ()-[r:RELATES]->() WHERE r.ft_key IS NULL "
             "RETURN r.id AS id, coalesce(r.user_id, '') AS user_id, coalesce(r.group_id, '') AS group_id LIMIT 5000",
             "UNWIND $rows AS row MATCH ()-[r:RELATES {id: row.id}]->() WHERE r.ft_key IS NULL SET r.ft_key = row.key"),
        )

        async def batch(tx: AsyncManagedTransaction, find: LiteralString, fill: LiteralString) -> int:
            rows = await (await tx.run(find)).data()
            keyed = [{"id": r["id"], "key": ft_key(r["user_id"], r["group_id"])} for r in rows]
            if keyed:
                await (await tx.run(fill, rows=keyed)).consume()
            return len(keyed)

        for find, fill in select:
            for _ in range(10_000):
                if await self._write(batch, find=find, fill=fill) == 0:
                    break

        async def keys(tx: AsyncManagedTransaction) -> int:  # entities written before the resolution gate
            rows = await (await tx.run("MATCH (e:Entity) WHERE e.keys IS NULL "
                                       "RETURN e.id AS id, e.name AS name, e.aliases AS aliases LIMIT 5000")).data()
            keyed = [{"id": r["id"], "keys": keys_of([r["name"] or "", *(r["aliases"] or [])])} for r in rows]
            if keyed:
                await (await tx.run("UNWIND $rows AS row MATCH (e:Entity {id: row.id}) SET e.keys = row.keys",
                                    rows=keyed)).consume()
            return len(keyed)

        for _ in range(10_000):
            if await self._write(keys) == 0:
                break

        async def legacy_users(tx: AsyncManagedTransaction) -> list[str | None]:
            return [r["user_id"] for r in await (await tx.run(cypher.LEGACY_MEMORY_USERS)).data()]

        async def edge_ids(tx: AsyncManagedTransaction, user_id: str | None) -> None:
            await (await tx.run(cypher.BACKFILL_EDGE_IDS, user_id=user_id)).consume()

        for _ in range(10_000):
            users: list[str | None] = await self._write(legacy_users)
            if not users:
                break
            for u in users:
                if u is None:  # no user: nothing can reference it; mark it done
                    await self._write(self._mark_orphans)
                else:
                    await self._write(edge_ids, user_id=u)

    @staticmethod
    async def _mark_orphans(tx: AsyncManagedTransaction) -> None:
        await (await tx.run("MATCH (m:Memory) WHERE m.user_id IS NULL AND m.edge_ids IS NULL "
                            "SET m.edge_ids = []")).consume()

    # ---- writes ---------------------------------------------------------------------------

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None) -> None:
        graph = link_rows(memories, links or [])
        now = utc_now()

        async def run(tx: AsyncManagedTransaction, rows: list[dict[str, Any]]) -> None:
            await (await tx.run(cypher.UPSERT_MEMORIES, rows=rows)).consume()
            await apply_links(tx, graph, now, self._resolver)

        await self._write(run, rows=sorted((memory_row(m) for m in memories), key=lambda r: str(r["id"])))

    async def replace_memory(self, memory: Memory, links: MemoryLinks, now: str) -> list[str]:
        if links.memory_id != memory.id:
            raise DomainError("links belong to another memory")
        now = iso_utc(now) or utc_now()
        graph = link_rows([memory], [links], default_valid_at=now)
        keep = sorted({r["id"] for r in graph["relations"]})
        keys = sorted({(r["source_id"], r["predicate"]) for r in graph["relations"]
                       if r["predicate"] in SINGLE_VALUED_PREDICATES})

        async def run(tx: AsyncManagedTransaction) -> list[str]:
            await (await tx.run(cypher.UPSERT_MEMORIES, rows=[memory_row(memory)])).consume()
            await (await tx.run(cypher.DROP_SUPPORT, memory_ids=[memory.id], memory_id=memory.id, keep=keep,
                                now=now)).consume()
            await apply_links(tx, graph, now, self._resolver)
            result = await tx.run(cypher.INVALIDATED_BY, memory_ids=[memory.id], memory_id=memory.id, now=now,
                                  keys=[list(k) for k in keys])
            return [str(r["id"]) for r in await result.data()]

        invalidated: list[str] = await self._write(run)
        return invalidated

    async def remove_memories(
        self, memory_ids: list[str], now: str, duplicate_of: dict[str, str] | None = None, *,
        user_id: str | None = None, erase: bool = False,
    ) -> list[str]:
        now = iso_utc(now) or utc_now()
        ids = list(dict.fromkeys(check_id(i, "memory id") for i in memory_ids))
        dups = {check_id(k, "memory id"): check_id(v, "memory id") for k, v in (duplicate_of or {}).items()}

        async def run(tx: AsyncManagedTransaction, chunk: list[str]) -> list[str]:
            rows = [{"id": i, "duplicate_of": dups.get(i), "user_id": user_id} for i in chunk]
            chunk_dups = {i: dups[i] for i in chunk if i in dups}
            await (await tx.run(cypher.MARK_REMOVED, rows=rows, now=now)).consume()
            await (await tx.run(cypher.DROP_REMOVED, memory_ids=chunk, dups=chunk_dups, now=now)).consume()
            if chunk_dups:
                await (await tx.run(cypher.ADOPT_EDGES, dups=chunk_dups)).consume()
            result = await tx.run(cypher.EXPIRED_BY, memory_ids=chunk, now=now)
            expired = [str(r["id"]) for r in await result.data()]
            if erase:
                await (await tx.run(cypher.ERASE_FACTS, memory_ids=chunk)).consume()
                await (await tx.run(cypher.ERASE_REMOVED, memory_ids=chunk)).consume()
            return expired

        async def remove(chunk: list[str]) -> list[str]:
            try:
                done: list[str] = await self._write(run, chunk=chunk)
                return done
            except TransientError as exc:  # too many edges for one transaction: halve (idempotent)
                if "MemoryPoolOutOfMemoryError" not in (exc.code or "") or len(chunk) == 1:
                    raise
                half = len(chunk) // 2
                return await remove(chunk[:half]) + await remove(chunk[half:])

        expired: list[str] = []
        for start in range(0, len(ids), REMOVE_BATCH):
            expired += await remove(ids[start : start + REMOVE_BATCH])
        return sorted(set(expired))

    # ---- reads ----------------------------------------------------------------------------

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
            hits = await _entity_hits(tx, query, terms, keys, common)
            edges: list[dict[str, Any]] = []
            if hits:
                result = await tx.run(cypher.ENTITY_EDGES, hits=list(hits), direct=DIRECT_EDGES,
                                      neighbours=NEIGHBOURS, per_neighbour=NEIGHBOUR_EDGES, hub=HUB_DEGREE, **common)
                edges = await result.data()
            facts: list[dict[str, Any]] = []
            if fact_q:
                result = await tx.run(cypher.FACT_TEXT_HITS, index=cypher.FACT_TEXT_INDEX, lucene=fact_q,
                                      k=max(2 * limit, 20), **common)
                facts = await result.data()
            return hits, edges, facts

        hits, edges, facts = await self._read(run)
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
        return [f for f in scored if f.score > 0][:limit]

    async def search_memories(self, user_id: str, groups: list[str], query: str, limit: int) -> list[tuple[str, float]]:
        return (await self.propose_memories(user_id, groups, query, limit)).memories

    async def propose_memories(self, user_id: str, groups: list[str], query: str, limit: int) -> GraphProposal:
        """The graph retriever (`cypher.MEMORY_RETRIEVER` has the ranking): one statement in one auto-commit
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
            stmt = cypher.MEMORY_RETRIEVER
            params.update(index=cypher.ENTITY_TEXT_INDEX, lucene=lucene_query(keys, ("name", "aliases"), terms))
        else:
            stmt = cypher.MEMORY_RETRIEVER_EXACT

        answer = await self._read_one(stmt, **params)
        if not answer:
            return GraphProposal([], [])
        names, mids, scores = answer[0]
        rows = [(str(mid), round(float(score), 6)) for mid, score in zip(mids, scores, strict=True)]
        return GraphProposal(sorted(rows, key=lambda ms: (-ms[1], ms[0])),
                             list(dict.fromkeys(str(n) for n in names or [] if n)))

    async def query_entities(self, user_id: str, groups: list[str], query: str) -> list[str]:
        """The ids of the entities the graph retriever starts from for this query (a trace's TOUCHED)."""
        checked, terms, keys = self._search_scope(user_id, groups, query)
        if not checked:
            return []
        common: dict[str, Any] = {"user_id": user_id, "groups": checked, "history": False}

        async def run(tx: AsyncManagedTransaction) -> list[str]:
            return sorted(await _entity_hits(tx, query, terms, keys, common))

        found: list[str] = await self._read(run)
        return found

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

        rows: list[dict[str, Any]] = await self._read(run)
        return rows

    @staticmethod
    def _paged(items: list[dict[str, object]], limit: int) -> Page:
        limit = clamp(limit, MAX_PAGE_LIMIT)
        more = len(items) > limit
        items = items[:limit]
        return Page(items=items, next_cursor=str(items[-1]["id"]) if more and items else None)

    async def list_nodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> Page:
        rows = await self._page(cypher.LIST_NODES, user_id, groups, limit, cursor)
        return self._paged([dict(r["item"]) for r in rows], limit)

    async def list_edges(
        self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None, include_history: bool = False
    ) -> Page:
        rows = await self._page(cypher.LIST_EDGES, user_id, groups, limit, cursor, include_history)
        return self._paged([edge_item(r["fact"]) for r in rows], limit)

    async def export_facts(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> Page:
        rows = await self._page(cypher.EXPORT_FACTS, user_id, groups, limit, cursor)
        return self._paged([dict(r["item"]) for r in rows], limit)

    async def mentions_of(self, user_id: str, memory_ids: list[str]) -> dict[str, list[str]]:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> dict[str, list[str]]:
            result = await tx.run(cypher.MENTIONS_OF, ids=memory_ids, user_id=user_id)
            return {str(r["memory_id"]): sorted(str(e) for e in r["entity_ids"]) for r in await result.data()}

        found: dict[str, list[str]] = await self._read(run)
        return found

    async def import_graph(self, user_id: str, memories: list[Memory], entities: list[dict[str, Any]],
                           mentions: list[dict[str, str]], facts: list[dict[str, Any]]) -> None:
        check_id(user_id, "user_id")
        memory_rows = [memory_row(m) for m in memories if m.user_id == user_id]
        ent_rows = [{**e, "name_lc": entity_name(str(e["name"])).casefold(),
                     "ft_key": ft_key(user_id, str(e["group_id"])),
                     "keys": sorted({*keys_of([str(e["name"]), *e["aliases"]]), *e.get("keys", [])}),
                     "identity": e.get("identity", {})} for e in entities]
        fact_rows = [{**f, "ft_key": ft_key(user_id, str(f["group_id"]))} for f in facts]

        async def run(tx: AsyncManagedTransaction) -> None:
            if ent_rows:
                await (await tx.run(cypher.IMPORT_ENTITIES, rows=ent_rows, user_id=user_id)).consume()
            if memory_rows:
                await (await tx.run(cypher.IMPORT_MEMORIES, rows=memory_rows)).consume()
            if mentions:
                await (await tx.run(cypher.UPSERT_MENTIONS, rows=mentions)).consume()
            if fact_rows:
                await (await tx.run(cypher.IMPORT_FACTS, rows=fact_rows, user_id=user_id)).consume()

        await self._write(run)

    async def export_entities(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> Page:
        rows = await self._page(cypher.EXPORT_ENTITIES, user_id, groups, limit, cursor)
        return self._paged([dict(r["item"]) for r in rows], limit)

    async def list_episodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> Page:
        rows = await self._page(cypher.LIST_EPISODES, user_id, groups, limit, cursor)
        return self._paged([dict(r["item"]) for r in rows], limit)

    async def entities(self, user_id: str) -> list[dict[str, object]]:
        async def run(tx: AsyncManagedTransaction, user_id: str) -> list[dict[str, object]]:
            result = await tx.run(
                "MATCH (e:Entity {user_id: $user_id}) "
                "RETURN e.id AS id, e.name AS name, e.type AS type, e.aliases AS aliases, e.group_id AS group_id "
                "ORDER BY e.name",
                user_id=user_id,
            )
            return [dict(r) for r in await result.data()]

        rows: list[dict[str, object]] = await self._read(run, user_id=user_id)
        return rows

    async def relations(self, user_id: str) -> list[dict[str, object]]:
        """Every edge, history included (invalid and expired ones too)."""

        async def run(tx: AsyncManagedTransaction, user_id: str) -> list[dict[str, object]]:
            result = await tx.run(
                "MATCH (s:Entity)-[r:RELATES {user_id: $user_id}]->(o:Entity) "
                "RETURN r.id AS id, s.name AS source, r.predicate AS predicate, o.name AS target, "
                "r.fact AS fact, r.valid_at AS valid_at, r.invalid_at AS invalid_at, "
                "r.expired_at AS expired_at, r.memory_ids AS memory_ids, r.group_id AS group_id "
                "ORDER BY source, predicate, target",
                user_id=user_id,
            )
            return [dict(r) for r in await result.data()]

        rows: list[dict[str, object]] = await self._read(run, user_id=user_id)
        return rows

    async def memory_nodes(self, user_id: str, memory_ids: list[str]) -> list[dict[str, Any]]:
        """The user's (:Memory) nodes with these ids (deleted ones too, with `deleted_at`)."""
        check_id(user_id, "user_id")
        ids = [check_id(i, "memory id") for i in memory_ids]

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(cypher.MEMORY_NODES, user_id=user_id, ids=ids)
            return [dict(r["item"]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._read(run)
        return rows

    async def memory_users(self, limit: int = 100_000) -> list[str]:
        async def run(tx: AsyncManagedTransaction) -> list[str]:
            result = await tx.run("MATCH (m:Memory) WHERE m.user_id IS NOT NULL "
                                  "RETURN DISTINCT m.user_id AS user_id LIMIT $limit", limit=limit)
            return [str(r["user_id"]) for r in await result.data()]

        users: list[str] = await self._read(run)
        return users

    async def count_memories(self, user_id: str) -> int:
        """Live memories only (deleted and deduplicated ones are history)."""

        async def run(tx: AsyncManagedTransaction, user_id: str) -> int:
            rec = await (await tx.run(
                "MATCH (m:Memory {user_id: $user_id}) WHERE m.deleted_at IS NULL RETURN count(m) AS n",
                user_id=user_id,
            )).single()
            return int(rec["n"]) if rec else 0

        return int(await self._read(run, user_id=user_id))

    async def ping(self) -> None:
        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run("RETURN 1")).consume()

        await self._read(run)

    async def close(self) -> None:
        await self._driver.close()



async def _entity_hits(tx: AsyncManagedTransaction, query: str, terms: list[str], keys: list[str],
                       common: dict[str, Any]) -> dict[str, float]:
    """The entities the query names: full-text over names and aliases (scores normalised by the best) and
    an exact match of the whole query (1.0); at most ENTITY_HITS, best first."""
    hits: dict[str, float] = {}
    if terms:
        result = await tx.run(cypher.ENTITY_TEXT_HITS, index=cypher.ENTITY_TEXT_INDEX,
                              lucene=lucene_query(keys, ("name", "aliases"), terms), k=ENTITY_HITS, **common)
        raw: dict[str, float] = {}
        for r in await result.data():  # a merged entity's hit counts for its target
            raw[str(r["id"])] = max(raw.get(str(r["id"]), 0.0), float(r["score"]))
        top = max(raw.values(), default=0.0)
        hits = {k: v / top for k, v in raw.items()} if top > 0 else {}
    name_lc = query[:MAX_QUERY_CHARS].strip().casefold()[:MAX_NAME_CHARS]
    if name_lc:
        for r in await (await tx.run(cypher.ENTITY_EXACT_HITS, name_lc=name_lc, **common)).data():
            hits[str(r["id"])] = 1.0
    best = sorted(hits, key=lambda h: (-hits[h], h))[:ENTITY_HITS]
    return {h: hits[h] for h in best}
