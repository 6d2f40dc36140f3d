"""The Neo4j backend assembled: one executor (executor.py: the driver, sessions, transactions, retries, deadlines)
and the parts that share it, each a small class holding its statements and implementing one narrow Protocol of
service/stores/graph.py `GraphStore`. `Neo4jGraphStore` builds them and holds them as attributes; service/deps.py
hands a caller the part it uses (`memories` to the ledger, `reads` to the search, `runs` and `run_reads` to the
runs, ...), and a caller of several names the part (`graph.reads.search_facts`). What is the whole backend's stays
here: its health, its schema, a delete of every tier of a user. No statement, session or rule lives here."""

from __future__ import annotations

from service.stores.graph import EntityNameRules
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

    async def ensure_schema(self) -> None:
        return await self.schema.ensure_schema()

    async def erase_tiers(self, user_id: str, before: str) -> int:
        return (await self.runs.erase_runs(user_id, before) + await self.traces.erase_traces(user_id, before)
                + await self.conversations.erase_sessions(user_id, before))
