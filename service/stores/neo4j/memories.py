"""The graph half of a memory's write (`MemoryGraph`, the `MemoryGraphWrites` part the ledger holds): memories,
their entities (through the identity gate, resolution.py), mentions and relations, updates, removals, imports. The
statements are in cypher_writes.py and cypher_portability.py, the entity step in links.py, rows and ids in
rows.py; sessions, transactions and chunked bulk writes are the executor's (executor.py)."""

from __future__ import annotations

import contextlib
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.core.domain import Memory, Scope, content_hash
from service.core.errors import DomainError
from service.stores.graph import SINGLE_VALUED_PREDICATES, EntityNameRules, EntityRef, MemoryLinks, RelationRef
from service.stores.neo4j import cypher_portability, cypher_writes, links
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import (
    check_id,
    entity_name,
    ft_key,
    iso_utc,
    link_rows,
    memory_row,
    utc_now,
)
from service.stores.reports import GraphReport


def supersede_rows(relations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SUPERSEDE's rows: the single-valued relations, oldest first, each with its slot (`<source id>|<predicate>`,
    the property by which the live edges of one subject and predicate are found)."""
    return sorted(
        ({"source_id": r["source_id"], "id": r["id"], "valid_at": str(r["valid_at"]),
          "slot": f"{r['source_id']}|{r['predicate']}"} for r in relations
         if r["predicate"] in SINGLE_VALUED_PREDICATES),
        key=lambda r: r["valid_at"],
    )


async def apply_links(tx: AsyncManagedTransaction, graph: dict[str, list[dict[str, Any]]], now: str,
                      names: EntityNameRules, vectors: dict[str, list[float]]) -> GraphReport:
    """Resolve the new entities (when the rules have a gate), MERGE entities, mentions and relations, then let
    single-valued facts replace older ones. Returns what it did per memory (links.py)."""
    origin, named = await links.write_entities(tx, graph, now, names, vectors)
    if graph["mentions"]:
        await (await tx.run(cypher_writes.UPSERT_MENTIONS, rows=graph["mentions"])).consume()
    if graph["relations"]:
        await (await tx.run(cypher_writes.UPSERT_RELATIONS, rows=graph["relations"])).consume()
    single = supersede_rows(graph["relations"])
    if single:  # oldest first, one round trip
        await (await tx.run(cypher_writes.SUPERSEDE, rows=single, now=now)).consume()
    return await links.finish_links(tx, graph, origin, named)



async def write_memories(tx: AsyncManagedTransaction, rows: list[dict[str, Any]],
                         graph: dict[str, list[dict[str, Any]]], now: str, names: EntityNameRules,
                         vectors: dict[str, list[float]]) -> GraphReport:
    """The memories' nodes, then their links (`apply_links`): one chunk of `upsert_memories`."""
    await (await tx.run(cypher_writes.UPSERT_MEMORIES, rows=rows)).consume()
    return await apply_links(tx, graph, now, names, vectors)


class _RolledBack(Exception):
    """Raised by a transaction function to roll its transaction back (`warm_write_plans`)."""


class MemoryGraph:
    """The graph half of a memory's write, update, removal and import (`MemoryGraphWrites`): the ledger's part."""

    def __init__(self, executor: Neo4jExecutor, names: EntityNameRules) -> None:
        self._exec = executor
        self._names = names  # how entity names compare; with a gate, new entities are resolved

    async def warm_write_plans(self) -> GraphReport:
        """The write path's statements, planned before the first write. A fresh server plans each statement the
        first time it sees it, on a cold JVM: several seconds for a write's dozen statements, which the first
        write would pay inside its transaction. One synthetic memory (two new entities, a single-valued relation)
        goes through the whole path (gate candidates, entities, mentions, relations, supersession) in a
        transaction that is then rolled back: nothing is stored, and the plans stay in the server's query cache.
        On a server that has seen the statements it is one quick transaction. Returns what the rolled-back write
        did."""
        now = utc_now()
        memory = Memory(id="warm-up", user_id="warm-up", content="Warm-up lives in Warm-up town.", category="fact",
                        scope=Scope.GLOBAL, hash=content_hash("warm-up"), created_at=now, updated_at=now)
        links = MemoryLinks(memory.id, [EntityRef("Warm-up person", "person"), EntityRef("Warm-up town", "place")],
                            [RelationRef("Warm-up person", "lives_in", "Warm-up town", memory.content)])
        done: list[GraphReport] = []

        async def body(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]) -> None:
            done.append(await write_memories(tx, [memory_row(memory)], graph, now, self._names, vectors))
            raise _RolledBack

        with contextlib.suppress(_RolledBack):
            await self._exec.link_write(self._names, lambda: link_rows([memory], [links], self._names), body)
        return done[-1]

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None
                              ) -> GraphReport:
        """The memories and their links, in chunks of memories sized by measured time (a job's few memories are
        one transaction; a bulk write is several, each well inside the deadline)."""
        now = utc_now()
        by_memory: dict[str, list[MemoryLinks]] = {}
        for link in links or []:
            by_memory.setdefault(link.memory_id, []).append(link)

        async def chunk(part: list[Memory]) -> GraphReport:
            rows = sorted((memory_row(m) for m in part), key=lambda r: str(r["id"]))
            part_links = [link for m in part for link in by_memory.get(m.id, [])]

            async def body(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]
                           ) -> GraphReport:
                return await write_memories(tx, rows, graph, now, self._names, vectors)

            done: GraphReport = await self._exec.link_write(
                self._names, lambda: link_rows(part, part_links, self._names), body, slow=True)
            return done

        report = GraphReport()
        for part in await self._exec.chunked("upsert", memories, chunk):
            report.add(part)
        return report

    async def replace_memory(self, memory: Memory, links: MemoryLinks, now: str) -> list[str]:
        if links.memory_id != memory.id:
            raise DomainError("links belong to another memory")
        now = iso_utc(now) or utc_now()

        def links_of() -> dict[str, Any]:
            return link_rows([memory], [links], self._names, default_valid_at=now)

        graph = links_of()
        keep = sorted({r["id"] for r in graph["relations"]})
        keys = sorted({(r["source_id"], r["predicate"]) for r in graph["relations"]
                       if r["predicate"] in SINGLE_VALUED_PREDICATES})

        async def body(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]
                       ) -> list[str]:
            await (await tx.run(cypher_writes.UPSERT_MEMORIES, rows=[memory_row(memory)])).consume()
            await (await tx.run(cypher_writes.DROP_SUPPORT, memory_ids=[memory.id], memory_id=memory.id, keep=keep,
                                now=now)).consume()
            await apply_links(tx, graph, now, self._names, vectors)
            result = await tx.run(cypher_writes.INVALIDATED_BY, memory_ids=[memory.id], memory_id=memory.id, now=now,
                                  keys=[list(k) for k in keys])
            return [str(r["id"]) for r in await result.data()]

        invalidated: list[str] = await self._exec.link_write(self._names, links_of, body)
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
            await (await tx.run(cypher_writes.MARK_REMOVED, rows=rows, now=now)).consume()
            await (await tx.run(cypher_writes.DROP_REMOVED, memory_ids=chunk, dups=chunk_dups, now=now)).consume()
            if chunk_dups:
                await (await tx.run(cypher_writes.ADOPT_EDGES, dups=chunk_dups)).consume()
            result = await tx.run(cypher_writes.EXPIRED_BY, memory_ids=chunk, now=now)
            expired = [str(r["id"]) for r in await result.data()]
            if erase:
                await (await tx.run(cypher_writes.ERASE_FACTS, memory_ids=chunk)).consume()
                await (await tx.run(cypher_writes.ERASE_REMOVED, memory_ids=chunk)).consume()
            return expired

        async def remove(chunk: list[str]) -> list[str]:
            done: list[str] = await self._exec.write(run, slow=True, chunk=chunk)
            return done

        expired = await self._exec.chunked("remove", ids, remove)
        return sorted({e for part in expired for e in part})

    async def import_graph(self, user_id: str, memories: list[Memory], entities: list[dict[str, Any]],
                           mentions: list[dict[str, str]], facts: list[dict[str, Any]]) -> None:
        check_id(user_id, "user_id")
        memory_rows = [memory_row(m) for m in memories if m.user_id == user_id]
        ent_rows = [{**e, "name_lc": entity_name(str(e["name"])).casefold(),
                     "ft_key": ft_key(user_id, str(e["group_id"])),
                     "keys": sorted({*self._names.keys_of([str(e["name"]), *e["aliases"]]), *e.get("keys", [])}),
                     "identity": e.get("identity", {})} for e in entities]
        fact_rows = [{**f, "ft_key": ft_key(user_id, str(f["group_id"]))} for f in facts]

        async def run(tx: AsyncManagedTransaction, stmt: LiteralString, rows: list[dict[str, Any]]) -> None:
            await (await tx.run(stmt, rows=rows, user_id=user_id)).consume()

        # entities, then memories, then mentions and facts (which need both), each in chunks sized by time
        steps: tuple[tuple[str, LiteralString, list[dict[str, Any]]], ...] = (
            ("import:entities", cypher_portability.IMPORT_ENTITIES, ent_rows),
            ("import:memories", cypher_portability.IMPORT_MEMORIES, memory_rows),
            ("import:mentions", cypher_writes.UPSERT_MENTIONS, [dict(m) for m in mentions]),
            ("import:facts", cypher_portability.IMPORT_FACTS, fact_rows),
        )
        for kind, stmt, rows in steps:
            async def write(part: list[dict[str, Any]], stmt: LiteralString = stmt) -> None:
                await self._exec.write(run, slow=True, stmt=stmt, rows=part)

            await self._exec.chunked(kind, rows, write)

    async def import_identity(self, user_id: str, same_as: list[dict[str, Any]], merges: list[tuple[str, str]]) -> None:
        """After an import's entities: their SAME_AS pairs, then each merge replayed (which copies the edges)."""
        check_id(user_id, "user_id")
        now = utc_now()

        async def pairs(tx: AsyncManagedTransaction, rows: list[dict[str, Any]]) -> None:
            await (await tx.run(cypher_portability.IMPORT_SAME_AS, rows=rows, user_id=user_id)).consume()

        async def replay(tx: AsyncManagedTransaction, part: list[tuple[str, str]]) -> None:
            for source_id, target_id in part:  # in the file's order: a chain of merges stays a chain
                await (await tx.run(cypher_writes.MERGE_ENTITIES, source_id=source_id, target_id=target_id,
                                    user_id=user_id, now=now)).consume()

        async def write_pairs(rows: list[dict[str, Any]]) -> None:
            await self._exec.write(pairs, slow=True, rows=rows)

        async def write_merges(part: list[tuple[str, str]]) -> None:
            await self._exec.write(replay, slow=True, part=part)

        # in chunks sized by measured time, like every bulk write (chunks.py)
        await self._exec.chunked("identity:pairs", same_as, write_pairs)
        await self._exec.chunked("identity:merges", merges, write_merges)
