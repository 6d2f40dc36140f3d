"""The Neo4j backend assembled: one executor (executor.py: the driver, sessions, transactions, retries, deadlines)
and the parts that share it, each a small class holding its statements. `Neo4jGraphStore` builds them and is the
facade of the whole `GraphBackend` for the callers that use many parts at once (the memory service, the console,
the worker's retry counters); service/deps.py hands every other caller its own part (`memories` to the ledger,
`runs` and `run_reads` to the runs, `conversations`, `facts`, `communities`, `entity_search`, ...). The facade only
delegates: no statement, session or rule lives here."""

from __future__ import annotations

from typing import Any

from service.core.domain import Memory
from service.stores.graph import EntityNameRules, GraphFact, GraphProposal, MemoryLinks, RowPage
from service.stores.neo4j.chunks import ChunkStats
from service.stores.neo4j.communities import CommunityGraph
from service.stores.neo4j.console import ConsoleGraph
from service.stores.neo4j.conversations import ConversationGraph
from service.stores.neo4j.curation import GraphCuration
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.facts import FactGraph
from service.stores.neo4j.memories import MemoryGraph
from service.stores.neo4j.reads import RetrievalGraph
from service.stores.neo4j.run_reads import RunReads
from service.stores.neo4j.runs import RunGraph
from service.stores.neo4j.schema import GraphSchema
from service.stores.neo4j.traces import TraceGraph
from service.stores.neo4j.turn import TurnGraph
from service.stores.reports import GraphReport
from service.stores.tiers import RunFilter, RunWrite


class Neo4jGraphStore:
    name = "neo4j"

    def __init__(self, uri: str, user: str, password: str | None, database: str, timeout: float,
                 names: EntityNameRules) -> None:
        self.executor = Neo4jExecutor(uri, user, password, database, timeout)
        x = self.executor
        self.memories = MemoryGraph(x, names)
        self.schema = GraphSchema(x, names, self.memories.warm_write_plans)
        self.reads = RetrievalGraph(x)
        self.facts = FactGraph(x, names)
        self.entity_search = TurnGraph(x)
        self.curation = GraphCuration(x, names)
        self.traces = TraceGraph(x)
        self.runs = RunGraph(x, names)
        self.run_reads = RunReads(x)
        self.conversations = ConversationGraph(x)
        self.communities = CommunityGraph(x)
        self.console = ConsoleGraph(x)

    @property
    def transient_retries(self) -> int:
        """Write transactions the driver re-ran on a transient error (deadlocks included)."""
        return self.executor.transient_retries

    @property
    def deadlock_retries(self) -> int:
        return self.executor.deadlock_retries

    @property
    def chunk_stats(self) -> ChunkStats:
        return self.executor.chunk_stats

    async def ping(self) -> None:
        await self.executor.ping()

    async def close(self) -> None:
        await self.executor.close()

    # ---- memories (memories.py) ----------------------------------------------------------------

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None
                              ) -> GraphReport:
        return await self.memories.upsert_memories(memories, links)

    async def replace_memory(self, memory: Memory, links: MemoryLinks, now: str) -> list[str]:
        return await self.memories.replace_memory(memory, links, now)

    async def remove_memories(
        self, memory_ids: list[str], now: str, duplicate_of: dict[str, str] | None = None, *,
        user_id: str | None = None, erase: bool = False,
    ) -> list[str]:
        return await self.memories.remove_memories(memory_ids, now, duplicate_of, user_id=user_id, erase=erase)

    async def import_graph(self, user_id: str, memories: list[Memory], entities: list[dict[str, Any]],
                           mentions: list[dict[str, str]], facts: list[dict[str, Any]]) -> None:
        return await self.memories.import_graph(user_id, memories, entities, mentions, facts)

    async def import_identity(self, user_id: str, same_as: list[dict[str, Any]], merges: list[tuple[str, str]]) -> None:
        return await self.memories.import_identity(user_id, same_as, merges)

    # ---- schema (schema.py) --------------------------------------------------------------------

    async def ensure_schema(self) -> None:
        return await self.schema.ensure_schema()

    # ---- reads (reads.py) ----------------------------------------------------------------------

    async def search_facts(
        self, user_id: str, groups: list[str], query: str, limit: int, include_history: bool = False
    ) -> list[GraphFact]:
        return await self.reads.search_facts(user_id, groups, query, limit, include_history)

    async def propose_memories(self, user_id: str, groups: list[str], query: str, limit: int) -> GraphProposal:
        return await self.reads.propose_memories(user_id, groups, query, limit)

    async def query_entities(self, user_id: str, groups: list[str], query: str) -> list[str]:
        return await self.reads.query_entities(user_id, groups, query)

    async def list_nodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        return await self.reads.list_nodes(user_id, groups, limit, cursor)

    async def list_edges(
        self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None, include_history: bool = False
    ) -> RowPage:
        return await self.reads.list_edges(user_id, groups, limit, cursor, include_history)

    async def export_facts(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        return await self.reads.export_facts(user_id, groups, limit, cursor)

    async def facts_of_memories(self, user_id: str, groups: list[str], memory_ids: list[str], limit: int
                                ) -> list[GraphFact]:
        return await self.reads.facts_of_memories(user_id, groups, memory_ids, limit)

    async def mentions_of(self, user_id: str, memory_ids: list[str]) -> dict[str, list[str]]:
        return await self.reads.mentions_of(user_id, memory_ids)

    async def export_entities(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        return await self.reads.export_entities(user_id, groups, limit, cursor)

    async def list_episodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        return await self.reads.list_episodes(user_id, groups, limit, cursor)

    async def memory_nodes(self, user_id: str, memory_ids: list[str]) -> list[dict[str, Any]]:
        return await self.reads.memory_nodes(user_id, memory_ids)

    async def memory_users(self, limit: int = 100_000) -> list[str]:
        return await self.reads.memory_users(limit)

    # ---- facts (facts.py) ----------------------------------------------------------------------

    async def find_entity(self, user_id: str, groups: list[str], *, entity_id: str | None = None,
                          name: str | None = None) -> dict[str, Any] | None:
        return await self.facts.find_entity(user_id, groups, entity_id=entity_id, name=name)

    async def entity_facts(self, user_id: str, entity_ids: list[str], *, include_history: bool, limit: int,
                           cursor: str | None = None, live_ends: bool = True
                           ) -> tuple[list[dict[str, Any]], str | None]:
        return await self.facts.entity_facts(user_id, entity_ids, include_history=include_history, limit=limit,
                                             cursor=cursor, live_ends=live_ends)

    async def query_facts(self, user_id: str, groups: list[str], *, subjects: list[str] | None,
                          objects: list[str] | None, predicates: list[str] | None, subject_types: list[str] | None,
                          object_types: list[str] | None, as_of: str | None, limit: int, cursor: str | None
                          ) -> tuple[list[dict[str, Any]], str | None]:
        return await self.facts.query_facts(user_id, groups, subjects=subjects, objects=objects, predicates=predicates,
                                            subject_types=subject_types, object_types=object_types, as_of=as_of,
                                            limit=limit, cursor=cursor)

    # ---- entity_search (turn.py) -------------------------------------------------------------

    async def search_entities(self, user_id: str, groups: list[str], query: str, limit: int
                              ) -> list[dict[str, Any]]:
        return await self.entity_search.search_entities(user_id, groups, query, limit)

    # ---- curation (curation.py) ----------------------------------------------------------------

    async def list_duplicates(self, user_id: str, groups: list[str] | None, limit: int,
                              cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        return await self.curation.list_duplicates(user_id, groups, limit, cursor)

    async def entity(self, user_id: str, entity_id: str) -> dict[str, Any]:
        return await self.curation.entity(user_id, entity_id)

    async def review_duplicate(self, user_id: str, source_id: str, target_id: str, confirm: bool,
                               reviewer: str | None, now: str) -> dict[str, Any]:
        return await self.curation.review_duplicate(user_id, source_id, target_id, confirm, reviewer, now)

    async def merge_entities(self, user_id: str, source_id: str, target_id: str, now: str,
                             reviewer: str | None = None) -> dict[str, Any]:
        return await self.curation.merge_entities(user_id, source_id, target_id, now, reviewer)

    async def unmerge_entity(self, user_id: str, entity_id: str, now: str) -> dict[str, Any]:
        return await self.curation.unmerge_entity(user_id, entity_id, now)

    async def graph_stats(self, user_id: str, groups: list[str] | None, now: str) -> dict[str, int]:
        return await self.curation.graph_stats(user_id, groups, now)

    # ---- traces (traces.py) --------------------------------------------------------------------

    async def write_trace(self, trace: dict[str, Any]) -> None:
        return await self.traces.write_trace(trace)

    async def trace(self, user_id: str, trace_id: str, now: str) -> dict[str, Any]:
        return await self.traces.trace(user_id, trace_id, now)

    async def traces_of_entity(self, user_id: str, entity_id: str | None, limit: int, cursor: str | None,
                               now: str) -> tuple[list[dict[str, Any]], str | None]:
        return await self.traces.traces_of_entity(user_id, entity_id, limit, cursor, now)

    async def purge_traces(self, now: str) -> int:
        return await self.traces.purge_traces(now)

    async def erase_traces(self, user_id: str, before: str) -> int:
        return await self.traces.erase_traces(user_id, before)

    # ---- runs (runs.py) ------------------------------------------------------------------------

    async def write_run(self, run: RunWrite) -> GraphReport | None:
        return await self.runs.write_run(run)

    async def delete_run(self, user_id: str, run_id: str, before: str) -> bool:
        return await self.runs.delete_run(user_id, run_id, before)

    async def expire_runs(self, before: str, user_id: str | None = None) -> int:
        return await self.runs.expire_runs(before, user_id)

    async def erase_runs(self, user_id: str, before: str) -> int:
        return await self.runs.erase_runs(user_id, before)

    # ---- run_reads (run_reads.py) --------------------------------------------------------------

    async def get_run(self, user_id: str, run_id: str) -> dict[str, Any] | None:
        return await self.run_reads.get_run(user_id, run_id)

    async def list_runs(self, user_id: str, session_id: str | None, project_id: str | None, limit: int,
                        cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        return await self.run_reads.list_runs(user_id, session_id, project_id, limit, cursor)

    async def run_summaries(self, user_id: str, run_ids: list[str]) -> list[dict[str, Any]]:
        return await self.run_reads.run_summaries(user_id, run_ids)

    async def dense_runs(self, flt: RunFilter, vector: list[float], model: str, k: int) -> list[tuple[str, float]]:
        return await self.run_reads.dense_runs(flt, vector, model, k)

    async def lexical_runs(self, flt: RunFilter, query: str, k: int
                           ) -> tuple[list[tuple[str, float]], list[tuple[str, float, dict[str, Any]]]]:
        return await self.run_reads.lexical_runs(flt, query, k)

    async def runs_touching(self, user_id: str, memory_ids: list[str], project_id: str | None, k: int
                            ) -> list[tuple[str, list[str], list[dict[str, Any]]]]:
        return await self.run_reads.runs_touching(user_id, memory_ids, project_id, k)

    async def lessons(self, user_id: str, project_id: str | None, session_id: str | None, scan: int,
                      after: int) -> list[dict[str, Any]]:
        return await self.run_reads.lessons(user_id, project_id, session_id, scan, after)

    async def run_stats(self, user_id: str, project_id: str | None) -> dict[str, Any]:
        return await self.run_reads.run_stats(user_id, project_id)

    # ---- conversations (conversations.py) ------------------------------------------------------

    async def store_messages(self, user_id: str, session_id: str, project_id: str | None, accepted_at: str,
                             rows: list[dict[str, Any]], restore: bool = False) -> int:
        return await self.conversations.store_messages(user_id, session_id, project_id, accepted_at, rows, restore)

    async def list_sessions(self, user_id: str, project_id: str | None, limit: int,
                            cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        return await self.conversations.list_sessions(user_id, project_id, limit, cursor)

    async def session(self, user_id: str, session_id: str) -> dict[str, Any] | None:
        return await self.conversations.session(user_id, session_id)

    async def session_messages(self, user_id: str, session_id: str, limit: int,
                               cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        return await self.conversations.session_messages(user_id, session_id, limit, cursor)

    async def search_messages(self, user_id: str, query: str, project_id: str | None, k: int
                              ) -> list[tuple[dict[str, Any], float]]:
        return await self.conversations.search_messages(user_id, query, project_id, k)

    async def delete_session(self, user_id: str, session_id: str, before: str) -> int:
        return await self.conversations.delete_session(user_id, session_id, before)

    async def erase_messages_of(self, user_id: str, memory_ids: list[str]) -> int:
        return await self.conversations.erase_messages_of(user_id, memory_ids)

    async def expire_messages(self, before: str, user_id: str | None = None) -> int:
        return await self.conversations.expire_messages(before, user_id)

    async def erase_tiers(self, user_id: str, before: str) -> int:
        return (await self.runs.erase_runs(user_id, before) + await self.traces.erase_traces(user_id, before)
                + await self.conversations.erase_sessions(user_id, before))

    # ---- communities (communities.py) ----------------------------------------------------------

    async def live_relations(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        return await self.communities.live_relations(user_id, limit)

    async def replace_communities(self, user_id: str, communities: list[dict[str, Any]], now: str) -> None:
        return await self.communities.replace_communities(user_id, communities, now)

    async def list_communities(self, user_id: str, limit: int, cursor: str | None
                               ) -> tuple[list[dict[str, Any]], str | None]:
        return await self.communities.list_communities(user_id, limit, cursor)

    async def communities_of(self, user_id: str, entity_ids: list[str], limit: int) -> list[dict[str, Any]]:
        return await self.communities.communities_of(user_id, entity_ids, limit)

    # ---- console (console.py) ------------------------------------------------------------------

    async def entities(self, user_id: str, ids: list[str]) -> list[dict[str, Any]]:
        return await self.console.entities(user_id, ids)

    async def find_entities(self, user_id: str, query: str, limit: int) -> list[dict[str, Any]]:
        return await self.console.find_entities(user_id, query, limit)

    async def memory_facts(self, user_id: str, memory_id: str, limit: int) -> list[dict[str, Any]]:
        return await self.console.memory_facts(user_id, memory_id, limit)

    async def merged_entities(self, user_id: str, into: str | None, limit: int) -> list[dict[str, Any]]:
        return await self.console.merged_entities(user_id, into, limit)

    async def entity_memories(self, user_id: str, entity_id: str, limit: int) -> list[str]:
        return await self.console.entity_memories(user_id, entity_id, limit)
