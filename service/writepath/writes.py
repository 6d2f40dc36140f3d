"""The worker side of memory writes: one writer per kind of job, each running the stages of
service/writepath/stages.py top to bottom (extract -> draft -> store -> supersede -> messages; the status is the
result the worker records). `MemoryWriter` builds the stages and the writers once per worker process and holds the
parts the reconciler repairs through. The API side is intake.py."""

from __future__ import annotations

import json
from typing import Any

import structlog

from service.ai.embeddings import Embedder
from service.ai.extraction import Extractor, LinkFinder
from service.conversations.writes import erase_after_delete
from service.core.domain import Memory, MemoryOut, Message
from service.core.embedding_models import Calibration
from service.core.keys import fold_pointer
from service.core.kv import RedisKV
from service.core.settings import AccessSettings, RedisQueueSettings, SearchSettings
from service.ledger.ledger import Ledger
from service.ledger.outbox import MemoryLocks
from service.memory.drafts import raw_memory
from service.memory.rules import existing, list_filter
from service.search.usage import RetrievalCounts
from service.stores.graph import GraphStore, MemoryLinks
from service.stores.vector import VectorStore
from service.tasks.jobs import ConversationJob, DeleteJob, RawBatchJob, RawJob, UpdateJob
from service.tasks.queue import TaskQueue
from service.writepath.stages import Changes, Draft, Extract, Linker, Messages, Rewrite, Store, Supersede

log = structlog.get_logger(__name__)


def erasure_keeps(settings: RedisQueueSettings) -> dict[str, str]:
    """What a delete of everything of a user keeps (none of it holds their words), and for how long: the delete's
    task result says it, docs/api.md ("Deleting a user's data") too."""
    return {
        "tombstones": "the ids and deletion times of the deleted memories, sessions and runs (no text), "
                      "for as long as the graph lives: a write accepted before the delete cannot bring them back",
        "task_records": "each task's id, kind, status and times (results and errors erased), until "
                        f"TASK_TTL_SECONDS ({settings.task_ttl_seconds} s) after its last change",
        "idempotency_records": "hashes of the requests and Idempotency-Keys (no text), until "
                               f"IDEMPOTENCY_WINDOW_SECONDS ({settings.idempotency_window_seconds} s) "
                               "after the write",
    }


class ConversationWrite:
    """A conversation: facts extracted and stored as a raw write would, plus their entities and relations; every
    message verbatim in `interaction` windows (service/memory/windows.py) beside them, so nothing said is lost.
    Memory ids are positions: facts first, then windows in message order."""

    def __init__(self, extract: Extract, draft: Draft, store: Store, changes: Changes, supersede: Supersede,
                 messages: Messages) -> None:
        self.extract = extract
        self.draft = draft
        self.store = store
        self.changes = changes
        self.supersede = supersede
        self.messages = messages

    async def run(self, task_id: str, job: ConversationJob) -> dict[str, Any]:
        messages = [Message.model_validate(m) for m in job.messages]
        extraction = await self.extract.run(task_id, job, messages)
        drafted = await self.draft.run(task_id, job, messages, extraction)
        memories = drafted.memories
        written = await self.store.run(task_id, memories, drafted.links) if memories else {"graph": "stored"}
        await self.supersede.mark(drafted.corrected)  # stored preferences this conversation corrected
        await self.supersede.mark(drafted.replaced)  # what the model said the facts replace
        await self.supersede.mark(await self.changes.run(task_id, job, messages, memories))  # what it changed
        session = await self.messages.run(task_id, job, messages, memories)
        log.info("conversation_extracted", extractor=extraction.extractor, facts=drafted.facts,
                 interactions=len(memories) - drafted.facts, dropped=extraction.dropped,
                 tokens=extraction.usage.total_tokens)
        return {
            "memories": [MemoryOut.of(m).model_dump(mode="json") for m in memories],
            **written,
            "extractor": extraction.extractor,
            "usage": extraction.usage.model_dump(),
            "dropped": extraction.dropped,
            "session_id": session,
        }


class RawWrite:
    """Pre-categorised memories: one (`one`, which folds a repeated observation of a session into the previous one)
    or a batch (`batch`: one embedding batch, one vector upsert, one graph upsert). Ids and timestamps come from the
    job, so a replay writes the very same points and nodes."""

    def __init__(self, store: Store, linker: Linker, rewrite: Rewrite, kv: RedisKV, vectors: VectorStore,
                 locks: MemoryLocks) -> None:
        self.store = store
        self.linker = linker
        self.rewrite = rewrite
        self.kv = kv  # fold pointers
        self.vectors = vectors
        self.locks = locks

    async def one(self, task_id: str, job: RawJob) -> dict[str, Any]:
        memory = raw_memory(task_id, 0, job.user_id, job, job.accepted_at)
        folded = await self._fold(task_id, job)
        if folded is not None:
            return folded
        written = await self.store.run(task_id, [memory], [self.linker(memory)])
        session, fold_key = job.metadata.get("session_id"), job.metadata.get("fold_key")
        if isinstance(session, str) and session and isinstance(fold_key, str) and fold_key:
            await self.kv.set_json(self._fold_pointer(job, session),
                                   {"fold_key": fold_key, "memory_id": memory.id, "count": 1, "last_task": task_id})
        return {"memories": [MemoryOut.of(memory).model_dump(mode="json")], **written}

    async def batch(self, task_id: str, job: RawBatchJob) -> dict[str, Any]:
        memories = [raw_memory(task_id, i, job.user_id, item, job.accepted_at)
                    for i, item in enumerate(job.items)]
        written = await self.store.run(task_id, memories, [self.linker(m) for m in memories])
        return {"memories": [MemoryOut.of(m).model_dump(mode="json") for m in memories], **written}

    async def _fold(self, task_id: str, job: RawJob) -> dict[str, Any] | None:
        """An observation that repeats the session's previous one (same `metadata.fold_key`, e.g. the same
        file edited again) folds into that memory with a count instead of being stored again. None: not a
        repeat (the caller stores it and it becomes the session's previous observation)."""
        fold_key, session = job.metadata.get("fold_key"), job.metadata.get("session_id")
        if not (isinstance(fold_key, str) and fold_key and isinstance(session, str) and session):
            return None
        pointer = await self.kv.get_json(self._fold_pointer(job, session))
        if not pointer or pointer.get("fold_key") != fold_key:
            return None
        async with self.locks.hold([pointer["memory_id"]]):
            found = [m for m in await self.vectors.get([pointer["memory_id"]]) if m.user_id == job.user_id]
            if not found:
                return None  # deleted meanwhile: store a new one
            [current] = found
            replay = pointer.get("last_task") == task_id
            count = int(pointer.get("count", 1)) + (0 if replay else 1)
            content = f"{job.content} (x{count})"
            result = await self.rewrite.run(task_id, current, content, current.category,
                                         {**job.metadata, "count": count}, job.accepted_at)
        await self.kv.set_json(self._fold_pointer(job, session), {**pointer, "count": count, "last_task": task_id})
        return {**result, "folded": True, "count": count}

    @staticmethod
    def _fold_pointer(job: RawJob, session: str) -> str:
        return fold_pointer(job.user_id, job.project_id, session)



class UpdateWrite:
    """New content for a memory: re-embedded and re-ingested into the graph (contradicted edges invalidated), under
    the memory's lock, so an update never interleaves with a delete or a dedup removal."""

    def __init__(self, rewrite: Rewrite, vectors: VectorStore, locks: MemoryLocks) -> None:
        self.rewrite = rewrite
        self.vectors = vectors
        self.locks = locks

    async def run(self, task_id: str, job: UpdateJob) -> dict[str, Any]:
        async with self.locks.hold([job.memory_id]):
            [current] = await existing(self.vectors, [job.memory_id], job.user_id)
            if current.updated_at > job.accepted_at:  # a newer update landed first: this one is history
                return {"memories": [MemoryOut.of(current).model_dump(mode="json")], "invalidated_edges": [],
                        "graph": "stored", "superseded": True}
            return await self.rewrite.run(task_id, current, job.content, job.category or current.category,
                                          current.metadata, job.accepted_at)


class DeleteWrite:
    """Memories deleted in both stores, and the content erased from everything that holds it (task records, the
    messages they came from, retrieval counts; with everything, the user's runs, sessions and traces)."""

    def __init__(self, redis: RedisQueueSettings, tasks: TaskQueue, kv: RedisKV, vectors: VectorStore,
                 graph: GraphStore, ledger: Ledger, locks: MemoryLocks, usage: RetrievalCounts) -> None:
        self.redis = redis  # task records and pending messages (erasure)
        self.tasks = tasks  # a delete erases the content from the task records
        self.kv = kv  # the resolved targets, so a replay deletes the same
        self.vectors = vectors
        self.graph = graph  # read: the live nodes a delete still has to finish; erased: the user's tiers
        self.ledger = ledger
        self.outbox = ledger.outbox  # tombstones
        self.locks = locks
        self.usage = usage  # a delete forgets the deleted memories' retrieval counts

    async def run(self, task_id: str, job: DeleteJob) -> dict[str, Any]:
        """Remove vectors, mark (:Memory) nodes deleted, expire edges no live memory supports.
        The ids are resolved once and kept with the task (and the outbox), so a retry or the
        reconciler finishes the graph part."""
        cached = await self.kv.load_step(task_id, "targets")
        if cached is not None:
            ids: list[str] = json.loads(cached)
        else:
            ids = await self._delete_targets(job)
            await self.kv.save_step(task_id, "targets", json.dumps(ids))
        everything = job.memory_ids is None and all(
            v is None for v in (job.scope, job.category, job.project_id, job.agent_id))
        kept = {"kept": erasure_keeps(self.redis)} if everything else {}
        if not ids:
            if everything:
                # the user's runs, sessions and traces too
                await self.graph.erase_tiers(job.user_id, job.accepted_at)
                await self.usage.forget(job.user_id, [], everything=True)
                await self.tasks.erasure.erase_user(job.user_id)
            return {"deleted": [], "expired_edges": [], "graph": "stored", **kept}
        async with self.locks.hold(ids):
            expired = await self.ledger.remove(task_id, job.user_id, ids, job.accepted_at)
            await self.tasks.erasure.erase(ids)
            await self.usage.forget(job.user_id, ids, everything)
            if everything:
                await self.tasks.erasure.erase_user(job.user_id)
        # the messages these memories came from (and with everything, the user's runs and sessions): now, or
        # when the graph is back if its half of the delete is pending (service/conversations/writes.py)
        await erase_after_delete(self.redis, self.tasks, self.graph, job.user_id, ids, everything,
                                 job.accepted_at, graph_done=expired is not None)
        log.info("memories_deleted", count=len(ids), expired_edges=len(expired or []))
        return {"deleted": ids, "expired_edges": expired or [], "graph": "stored" if expired is not None else "pending",
                **kept}

    async def _delete_targets(self, job: DeleteJob) -> list[str]:
        user_id = job.user_id
        if job.memory_ids:
            found = {m.id for m in await self.vectors.get(list(job.memory_ids)) if m.user_id == user_id}
            # A memory whose vector is gone but whose graph half is still live (a delete that stopped
            # half-way) is a target too: deleting it again finishes the job.
            rest = [i for i in job.memory_ids if i not in found]
            found |= await self.outbox.tombstoned(user_id, rest)
            rest = [i for i in rest if i not in found]
            if rest:
                nodes = await self.graph.reads.memory_nodes(user_id, rest)
                found |= {str(n["id"]) for n in nodes if not n.get("deleted_at")}
            return [i for i in job.memory_ids if i in found]
        flt = list_filter(user_id, job.scope, job.category, job.project_id, job.agent_id, all_scopes=True)
        ids: list[str] = []
        cursor: str | None = None
        for _ in range(10_000):  # bounded: 10,000 pages of 500
            page, cursor = await self.vectors.scroll(flt, 500, cursor)
            # never delete what was written after the request was accepted
            ids += [m.id for m in page if m.created_at <= job.accepted_at]
            if cursor is None:
                break
        return ids


class MemoryWriter:
    """The stages and the writers of the raw, batch, conversation, update and delete jobs, built once per worker
    process (worker/handlers.py); and the parts the reconciler repairs through (service/maintenance/reconcile.py
    `RepairPath`). Every store write goes through the ledger."""

    def __init__(self, redis: RedisQueueSettings, search: SearchSettings, access: AccessSettings,
                 calibration: Calibration, tasks: TaskQueue, kv: RedisKV, vectors: VectorStore,
                 graph: GraphStore, ledger: Ledger, locks: MemoryLocks, embedder: Embedder, extractor: Extractor,
                 links: LinkFinder, usage: RetrievalCounts) -> None:
        self.redis = redis
        self.tasks = tasks
        self.kv = kv
        self.vectors = vectors
        self.graph = graph
        self.ledger = ledger  # the only writer of either store for a memory
        self.outbox = ledger.outbox
        self.locks = locks
        self.embedder = embedder
        self.linker = Linker(links)
        supersede = Supersede(vectors, ledger, locks)
        self.store = Store(ledger, embedder, supersede)
        rewrite = Rewrite(ledger, embedder, self.linker)
        self.conversation = ConversationWrite(
            Extract(kv, extractor, embedder, vectors), Draft(search, access, vectors, self.linker), self.store,
            Changes(embedder, vectors, calibration), supersede, Messages(redis, tasks, graph.conversations))
        self.raw = RawWrite(self.store, self.linker, rewrite, kv, vectors, locks)
        self.update = UpdateWrite(rewrite, vectors, locks)
        self.delete = DeleteWrite(redis, tasks, kv, vectors, graph, ledger, locks, usage)

    def links_of(self, memory: Memory) -> MemoryLinks:
        """The links of a memory the extractor did not link (stages.py `Linker`)."""
        return self.linker(memory)
