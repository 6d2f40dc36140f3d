"""The one writer of both stores for a memory.

Every write, update, delete, dedup removal, reconcile repair, import and re-embedding of a memory goes through
`Ledger`; no other code holds the vector store's write methods' callers or the graph's `MemoryGraphWrites`.
A job's write follows one protocol here:

1. the intent (what both stores must end up holding) goes into the outbox;
2. the vector half is written (searchable from here on);
3. the graph half goes to the per-user `GraphWriter`, which coalesces a user's writes;
4. the intent is cleared when the graph holds it. A graph outage keeps it for the reconciler, which
   finishes it with `finish` (the job completes with `graph: "pending"`).

Repairs and maintenance write one store to match the other, so they take no intent: the full reconcile and
the dedup sweep find their own work again when they run next.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from service.core.domain import Memory, now_iso
from service.core.errors import DependencyUnavailable
from service.core.metrics import STAGE, timed
from service.ledger.graph_writer import GraphWriter
from service.ledger.outbox import Intent, Outbox
from service.stores.graph import MemoryGraphWrites, MemoryLinks
from service.stores.reports import GraphReport
from service.stores.vector import VectorStore

log = structlog.get_logger(__name__)

_T = TypeVar("_T")
Embed = Callable[[list[str]], Awaitable[list[list[float]]]]
PAGE = 500  # ids per vector delete


class Ledger:
    def __init__(self, outbox: Outbox, vectors: VectorStore, graph: MemoryGraphWrites) -> None:
        self.outbox = outbox
        self._vectors = vectors
        self._graph = graph
        self.graph_writer = GraphWriter(graph)

    # ---- a job's writes: intent, vectors, graph, clear ----------------------------------------

    async def store(self, task_id: str, memories: list[Memory], links: list[MemoryLinks], embed: Embed
                    ) -> GraphReport | None:
        """New memories in both stores (`embed` gives their vectors once the intent is recorded): what the graph
        did with their links. None: the graph half waits in the outbox (the memories are searchable already)."""
        user_id = memories[0].user_id
        intent = Intent(op="upsert", task_id=task_id, user_id=user_id, memories=memories,
                        links=Intent.of_links(links))
        await self.outbox.put(intent)
        with timed(STAGE, stage="embed"):
            vectors = await embed([m.content for m in memories])
        with timed(STAGE, stage="vector"):
            await self._vectors.upsert(memories, vectors)
            await self._drop_deleted(user_id, [m.id for m in memories])
        with timed(STAGE, stage="graph"):
            return await self._graph_step(intent, self.graph_writer.upsert(user_id, memories, links))

    async def _drop_deleted(self, user_id: str, ids: list[str]) -> None:
        """A late run of a write job (its lease lapsed while it ran, so the job ran twice) must not bring back a
        memory deleted meanwhile. New memories take no lock, so the order does it: this run upserts, then reads
        the tombstones; a delete records its tombstone (in its intent), then drops the vectors. Whichever comes
        second sees the other's step, so the vector is gone either way. The graph half checks its own
        tombstone nodes (`deleted_at`)."""
        deleted = await self.outbox.tombstoned(user_id, ids)
        if deleted:
            log.warning("late_write_of_deleted_memories", count=len(deleted))
            await self.drop_vectors(sorted(deleted))

    async def replace(self, task_id: str, memory: Memory, links: MemoryLinks, now: str, embed: Embed
                      ) -> list[str] | None:
        """New content for an existing memory (the caller holds its lock). The ids of the edges it invalidated;
        None: the graph half waits in the outbox."""
        intent = Intent(op="replace", task_id=task_id, user_id=memory.user_id, memories=[memory],
                        links=Intent.of_links([links]), now=now)
        await self.outbox.put(intent)
        [vector] = await embed([memory.content])
        await self._vectors.upsert([memory], [vector])
        return await self._graph_step(intent, self.graph_writer.replace(memory.user_id, memory, links, now))

    async def remove(self, task_id: str, user_id: str, ids: list[str], now: str) -> list[str] | None:
        """A user's delete (the caller holds the locks): vectors go, graph nodes become tombstones and
        what no memory states any more is erased. The ids of the edges expired; None: the graph half waits."""
        intent = Intent(op="remove", task_id=task_id, user_id=user_id, memory_ids=ids, now=now)
        await self.outbox.put(intent)
        await self.drop_vectors(ids)
        return await self._graph_step(intent, self.graph_writer.remove(user_id, ids, now))

    async def finish(self, intent: Intent, live: dict[str, Memory]) -> bool:
        """The reconciler's drain: finish a recorded intent whose job ended without clearing it. `live`: the
        intent's memories as the vector store holds them now. False when nothing was left to do (they are gone,
        or updated again since). The caller clears the intent."""
        if intent.op == "remove":
            await self.drop_vectors(intent.memory_ids)
            await self.graph_writer.remove(intent.user_id, intent.memory_ids, intent.now or now_iso())
            return True
        if intent.op == "replace":
            [memory] = intent.memories
            current = live.get(memory.id)
            if current is None or current.updated_at != memory.updated_at:
                return False  # deleted, or updated again since (that update carries the graph)
            [links] = intent.graph_links()
            await self.graph_writer.replace(intent.user_id, memory, links, intent.now or memory.updated_at)
            return True
        keep = [m for m in intent.memories if m.id in live]
        if not keep:
            return False
        ids = {m.id for m in keep}
        await self.graph_writer.upsert(intent.user_id, keep, [lk for lk in intent.graph_links() if lk.memory_id in ids])
        return True

    async def supersede(self, memories: list[Memory]) -> None:
        """Older memories marked superseded (`superseded_by`/`superseded_at` set; the caller holds their locks).
        Only the vector store's payload changes (the graph keeps no supersession, docs/preferences.md), so there is
        no graph half and no intent: the job that marks them is retried until it ends, and marking again is
        idempotent. Same content, so nothing is embedded: the payload is updated in place."""
        await self._vectors.update_payload(memories)

    # ---- repairs and maintenance: one store brought in line with the other --------------------

    async def restore_graph(self, user_id: str, memories: list[Memory], links: list[MemoryLinks]) -> None:
        """Graph nodes for memories the vector store holds and the graph lacks."""
        await self.graph_writer.upsert(user_id, memories, links)

    async def restore_vectors(self, memories: list[Memory], vectors: list[list[float]]) -> None:
        """Vectors for live graph memories the vector store lacks (the caller holds their locks), or new vectors
        for stored memories (a re-embedding)."""
        await self._vectors.upsert(memories, vectors)

    async def drop_vectors(self, ids: list[str]) -> None:
        for start in range(0, len(ids), PAGE):
            await self._vectors.delete(ids[start : start + PAGE])

    async def finish_removal(self, user_id: str, ids: list[str], now: str) -> list[str]:
        """The graph half of a delete whose vector half is done."""
        return await self.graph_writer.remove(user_id, ids, now)

    async def expire_duplicates(self, ids: list[str], now: str, duplicate_of: dict[str, str] | None = None
                                ) -> list[str]:
        """Dedup: the removed copies' graph nodes are marked (duplicate_of their survivor) and the edges only
        they supported expire; the survivors keep the rest. The ids of the edges expired."""
        return await self._graph.remove_memories(ids, now, duplicate_of)

    async def import_memories(self, user_id: str, memories: list[Memory], vectors: list[list[float]],
                              entities: list[dict[str, Any]], mentions: list[dict[str, str]],
                              facts: list[dict[str, Any]]) -> None:
        """Exported memories with their graph (entities, mentions, facts with history), vectors first."""
        if memories:
            await self._vectors.upsert(memories, vectors)
        await self._graph.import_graph(user_id, memories, entities, mentions, facts)

    async def import_identity(self, user_id: str, same_as: list[dict[str, Any]],
                              merges: list[tuple[str, str]]) -> None:
        await self._graph.import_identity(user_id, same_as, merges)

    # ---- helpers ------------------------------------------------------------------------------

    async def _graph_step(self, intent: Intent, write: Awaitable[_T]) -> _T | None:
        """The graph half of a job whose vector half is done. Stored: the intent is cleared and the result
        returned. Graph unavailable: None, and the intent stays for the reconciler. Any other error propagates
        (the job fails, the intent stays)."""
        try:
            result = await write
        except DependencyUnavailable as exc:
            log.warning("graph_write_pending", task_id=intent.task_id, op=intent.op, error=str(exc)[:300])
            return None
        await self.outbox.clear(intent.task_id)
        return result
