"""The worker side of writes: extract, embed and write both stores through the ledger; update and delete under
the memory's lock; fold a repeated observation into the previous one. The API side is intake.py."""

from __future__ import annotations

import json
from typing import Any

import structlog

from service.ai.embeddings import Embedder
from service.ai.extraction import KNOWN_CHARS, KNOWN_MEMORIES, ExtractionResult, Extractor, KnownMemory, LinkFinder
from service.conversations.writes import erase_after_delete, keep_messages
from service.core.domain import Memory, MemoryOut, Message, content_hash, memory_id_for, now_iso
from service.core.embedding_models import Calibration
from service.core.keys import fold_pointer
from service.core.kv import RedisKV
from service.core.metrics import STAGE, timed
from service.core.settings import AccessSettings, RedisQueueSettings, SearchSettings
from service.memory import changes, preferences
from service.memory.drafts import INTERACTION, Drafts, fact_memory, raw_memory, single_text, window_memory
from service.memory.rules import existing, list_filter, scroll_all
from service.memory.windows import (
    anchored_time,
    event_time,
    first_time,
    interaction_windows,
    source_id,
    speaker_label,
    valid_indexes,
)
from service.search.context_format import days
from service.search.usage import RetrievalCounts
from service.stores.graph import EntityRef, GraphStore, MemoryLinks, RelationRef
from service.stores.vector import MemoryFilter, RankRequest, VectorStore
from service.tasks.jobs import ConversationJob, DeleteJob, RawBatchJob, RawJob, UpdateJob
from service.tasks.queue import TaskQueue
from service.writepath.ledger import Ledger
from service.writepath.links import structured_links
from service.writepath.outbox import MemoryLocks

log = structlog.get_logger(__name__)

CHANGE_CANDIDATES = 10  # the memories nearest a changing message that are checked for its slot



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

class MemoryWriter:
    """The worker side of writes: the handlers of the raw, batch, conversation, update and delete jobs. Every
    store write goes through the ledger."""

    def __init__(self, redis: RedisQueueSettings, search: SearchSettings, access: AccessSettings,
                 calibration: Calibration, tasks: TaskQueue, kv: RedisKV, vectors: VectorStore,
                 graph: GraphStore, ledger: Ledger, locks: MemoryLocks, embedder: Embedder, extractor: Extractor,
                 links: LinkFinder, usage: RetrievalCounts) -> None:
        self.redis = redis  # task records and pending messages (erasure, conversations)
        self.search = search  # TIME_ANCHORING
        self.access = access  # INTERACTION_WINDOW_MESSAGES
        self.calibration = calibration  # the embedding model's thresholds (corrections)
        self.tasks = tasks  # a delete erases the content from the task records
        self.kv = kv  # step caches and fold pointers, so a replayed job writes the same
        self.vectors = vectors
        self.graph = graph  # read only: the live nodes a delete still has to finish
        self.ledger = ledger  # the only writer of either store for a memory
        self.outbox = ledger.outbox  # read here: tombstones
        self.locks = locks
        self.embedder = embedder
        self.extractor = extractor
        self.links = links
        self.usage = usage  # a delete forgets the deleted memories' retrieval counts

    async def store_conversation(self, task_id: str, job: ConversationJob) -> dict[str, Any]:
        """Extract facts and store each as a raw write would, plus its entities and relations; store every
        message verbatim in `interaction` windows (service/memory/windows.py) beside them, so nothing said is
        lost. Memory ids are positions: facts first, then windows in message order."""
        messages = [Message.model_validate(m) for m in job.messages]
        # A replayed job reuses the first extraction: an LLM may not answer the same twice,
        # and memory ids are positions in this list.
        cached = await self.kv.load_step(task_id, "extraction")
        if cached is not None:
            extraction = ExtractionResult.model_validate_json(cached)
        else:
            # an LLM is shown the user's stored memories the conversation may change, and names those a fact
            # replaces (the cached extraction keeps their ids: a replay needs no lookup)
            known = await self._known(task_id, job, messages) if self.extractor.names_replacements else []
            with timed(STAGE, stage="extract"):  # LLM calls and tokens are counted per call by the Gemini client
                extraction = await self.extractor.extract(messages, job.project_id, known)
            await self.kv.save_step(task_id, "extraction", extraction.model_dump_json())
        drafts = Drafts(messages)
        anchored = self.search.time_anchoring
        when = anchored_time if anchored else first_time
        replaced: dict[str, str] = {}  # a stored memory the model says a fact replaces -> that fact's memory
        for fact in extraction.facts:
            sources = valid_indexes(fact.source_messages, len(messages))
            memory = fact_memory(task_id, len(drafts.memories), fact, job, when(sources, messages, job.accepted_at),
                                 event_time(sources, messages, job.accepted_at) if anchored else None)
            drafts.add(memory, sources, MemoryLinks(
                memory_id=memory.id,
                entities=[EntityRef(e.name, e.type, role=e.role) for e in fact.entities],
                relations=[
                    RelationRef(r.subject, r.predicate, r.object, r.fact, fact.valid_at or memory.occurred_at)
                    for r in fact.relations  # valid from when it happened (the message's time), not from now
                ],
            ), fact=True)
            if fact.replaces and any(m.id == memory.id for m in drafts.memories):  # kept, not a repeat
                replaced.update(dict.fromkeys(fact.replaces, memory.id))
        corrected = await self._corrections(task_id, job, messages, drafts)
        facts = len(drafts.memories)
        # Every message is kept verbatim in an interaction window, the facts beside them: a fact is a rewording
        # of part of a message, and the words themselves are what many questions later match (docs/retrieval.md,
        # "The conversation path").
        for window in interaction_windows(messages, (), self.access.interaction_window_messages):
            memory = window_memory(task_id, len(drafts.memories), window, messages, job, anchored)
            drafts.add(memory, list(window.indexes), None, alias=single_text(window, messages))
        memories, links = drafts.finish(self.links_of)
        written = await self.write_memories(task_id, memories, links) if memories else {"graph": "stored"}
        await self._mark(corrected)  # stored preferences this conversation corrected
        await self._mark(replaced)  # what the model said the facts replace
        await self._mark(await self._changes(task_id, job, messages, memories))  # what its messages changed
        session = await keep_messages(self.redis, self.tasks, self.graph.conversations, task_id, job.user_id,
                                      job.session_id,
                                      job.project_id, job.accepted_at, messages, memories)
        log.info("conversation_extracted", extractor=extraction.extractor, facts=facts,
                 interactions=len(memories) - facts, dropped=extraction.dropped, tokens=extraction.usage.total_tokens)
        return {
            "memories": [MemoryOut.of(m).model_dump(mode="json") for m in memories],
            **written,
            "extractor": extraction.extractor,
            "usage": extraction.usage.model_dump(),
            "dropped": extraction.dropped,
            "session_id": session,
        }

    async def store_raw(self, task_id: str, job: RawJob) -> dict[str, Any]:
        """Embed and write one memory to both stores. Ids and timestamps come from the job,
        so a replay writes the very same point and node."""
        memory = raw_memory(task_id, 0, job.user_id, job, job.accepted_at)
        folded = await self._fold(task_id, job)
        if folded is not None:
            return folded
        written = await self.write_memories(task_id, [memory], [self.links_of(memory)])
        session, fold_key = job.metadata.get("session_id"), job.metadata.get("fold_key")
        if isinstance(session, str) and session and isinstance(fold_key, str) and fold_key:
            await self.kv.set_json(self._fold_pointer(job, session),
                                      {"fold_key": fold_key, "memory_id": memory.id, "count": 1, "last_task": task_id})
        return {"memories": [MemoryOut.of(memory).model_dump(mode="json")], **written}

    async def store_raw_batch(self, task_id: str, job: RawBatchJob) -> dict[str, Any]:
        """The batch's memories, written together: one embedding batch, one vector upsert, one graph upsert."""
        memories = [raw_memory(task_id, i, job.user_id, item, job.accepted_at)
                    for i, item in enumerate(job.items)]
        written = await self.write_memories(task_id, memories, [self.links_of(m) for m in memories])
        return {"memories": [MemoryOut.of(m).model_dump(mode="json") for m in memories], **written}

    def links_of(self, memory: Memory) -> MemoryLinks:
        """Graph side of a raw write, an update or an interaction window: the injected LinkFinder (no LLM).
        A window gets mentions only: its "I" may be the assistant, so first-person relations would lie.
        A structured write's memory (service/graph_api/) carries its links in `metadata.graph`."""
        structured = structured_links(memory)
        if structured is not None:
            return structured
        entities, relations = self.links.find(memory.content, memory.category, memory.project_id)
        if memory.category == INTERACTION and memory.source_message_ids:
            relations = []
        # when the fact became true: the extractor's date, else when it happened (the message's time, or the day its
        # time phrase names: "we moved to Porto last weekend"), never when the job ran
        stated = memory.metadata.get("valid_at")
        valid_at = stated if isinstance(stated, str) else memory.occurred_at
        refs = [EntityRef(e.name, e.type) for e in entities]
        for name in memory.applies_to:  # what a preference applies to is an entity it mentions (its type, if known)
            named = [EntityRef(e.name, e.type) for e in self.links.find(name, memory.category, memory.project_id)[0]]
            known = {x.name.casefold() for x in refs}
            refs += [r for r in named or [EntityRef(name)] if r.name.casefold() not in known]
        return MemoryLinks(
            memory_id=memory.id,
            entities=refs,
            relations=[RelationRef(r.subject, r.predicate, r.object, r.fact, valid_at) for r in relations],
        )

    async def apply_update(self, task_id: str, job: UpdateJob) -> dict[str, Any]:
        """Re-embed the new content and re-ingest it into the graph (contradicted edges invalidated).
        Under the memory's lock: an update never interleaves with a delete or a dedup removal."""
        async with self.locks.hold([job.memory_id]):
            [current] = await existing(self.vectors, [job.memory_id], job.user_id)
            if current.updated_at > job.accepted_at:  # a newer update landed first: this one is history
                return {"memories": [MemoryOut.of(current).model_dump(mode="json")], "invalidated_edges": [],
                        "graph": "stored", "superseded": True}
            return await self._replace(task_id, current, job.content, job.category or current.category,
                                       current.metadata, job.accepted_at)

    async def _replace(
        self, task_id: str, current: Memory, content: str, category: str, metadata: dict[str, Any], accepted_at: str
    ) -> dict[str, Any]:
        """New content for an existing memory in both stores (the caller holds the memory's lock)."""
        updated = current.model_copy(update={
            "content": content, "category": category, "hash": content_hash(content), "metadata": metadata,
            "updated_at": accepted_at, "task_id": task_id, "stored_at": now_iso(),
        })
        invalidated = await self.ledger.replace(task_id, updated, self.links_of(updated), accepted_at,
                                                self.embedder.embed)
        log.info("memory_updated", memory_id=updated.id, invalidated_edges=len(invalidated or []))
        return {"memories": [MemoryOut.of(updated).model_dump(mode="json")], "invalidated_edges": invalidated or [],
                "graph": "stored" if invalidated is not None else "pending"}

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
            result = await self._replace(task_id, current, content, current.category,
                                         {**job.metadata, "count": count}, job.accepted_at)
        await self.kv.set_json(self._fold_pointer(job, session),
                                  {**pointer, "count": count, "last_task": task_id})
        return {**result, "folded": True, "count": count}

    @staticmethod
    def _fold_pointer(job: RawJob, session: str) -> str:
        return fold_pointer(job.user_id, job.project_id, session)

    async def apply_delete(self, task_id: str, job: DeleteJob) -> dict[str, Any]:
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


    async def write_memories(self, task_id: str, memories: list[Memory], links: list[MemoryLinks]
                             ) -> dict[str, Any]:
        """Both stores, intent first. The task result's graph part: `graph` "stored" when the graph holds them
        too, with the entities the write named (each with the gate's decision and the entity it ended as),
        `entity_count` and `relation_count`; "pending" when the graph half waits in the outbox for the
        reconciler (the memories are searchable already; no entities yet)."""
        stored_at = now_iso()
        memories = [m.model_copy(update={"stored_at": stored_at}) for m in memories]
        memories = preferences.within_job(memories, stored_at)
        report = await self.ledger.store(task_id, memories, links, self.embedder.embed)
        superseded = await self._supersede(memories)
        log.info("memories_written", count=len(memories), ids=[m.id for m in memories], graph=report is not None,
                 superseded=superseded)
        if report is None:
            return {"graph": "pending", "entities": [], "entity_count": 0, "relation_count": 0}
        return {"graph": "stored", **report.summary()}

    # ---- preferences with a scope and a history (service/memory/preferences.py) ---------------

    async def _supersede(self, memories: list[Memory]) -> list[str]:
        """Mark every active preference of the new memories' slots that is not its slot's newest (older ones; or
        a memory of this job, when a write accepted later already ran). The ids marked."""
        new = [m for m in memories if preferences.slot(m) is not None and m.superseded_by is None]
        slots = {preferences.slot(m) for m in new}
        marked: list[str] = []
        for user_id, scope, project_id in sorted({(m.user_id, m.scope, m.project_id) for m in new},
                                                 key=lambda k: (k[0], k[1].value, k[2] or "")):
            flt = MemoryFilter(user_id=user_id, scope=scope, project_id=project_id,
                               categories=(preferences.PREFERENCE,), active_only=True)
            active = [m for m in await scroll_all(self.vectors, flt) if m.project_id == project_id]
            marked += await self._mark({m.id: by for m, by in preferences.to_supersede(active)
                                        if preferences.slot(m) in slots})
        return marked

    async def _mark(self, superseded: dict[str, str]) -> list[str]:
        """Mark memories superseded (id -> the id of what supersedes it), under their locks, unless already
        marked. The ids marked."""
        if not superseded:
            return []
        ids = sorted(superseded)
        async with self.locks.hold(ids):
            at = now_iso()
            older = [m.model_copy(update={"superseded_by": superseded[m.id], "superseded_at": at})
                     for m in await self.vectors.get(ids)  # as they are now, under their locks
                     if m.superseded_by is None]
            if older:
                await self.ledger.supersede(older)
        return [m.id for m in older]

    async def _known(self, task_id: str, job: ConversationJob, messages: list[Message]) -> list[KnownMemory]:
        """The user's stored memories nearest what the user says in this conversation (at most KNOWN_MEMORIES, each
        cut to KNOWN_CHARS): what an LLM extractor may say a fact replaces. Earlier ones only: a replay or a job
        that runs late is never shown memories newer than itself."""
        said = " ".join(m.content for m in messages if m.role == "user")[:4000]
        if not said.strip():
            return []
        [vector] = await self.embedder.embed([said])
        [hits] = await self.vectors.rank([RankRequest(
            MemoryFilter(user_id=job.user_id, project_id=job.project_id, active_only=True), 2 * KNOWN_MEMORIES,
            vector=vector)])
        found = {m.id: m for m in await self.vectors.get([mid for mid, _ in hits])}
        earlier = [found[mid] for mid, _ in hits if mid in found and found[mid].task_id != task_id
                   and found[mid].created_at < job.accepted_at and found[mid].superseded_by is None]
        return [KnownMemory(id=m.id, content=m.content[:KNOWN_CHARS],
                            said=days(m.occurred_at, m.created_at, m.metadata)[0])
                for m in earlier[:KNOWN_MEMORIES]]

    async def _changes(self, task_id: str, job: ConversationJob, messages: list[Message], memories: list[Memory]
                       ) -> dict[str, str]:
        """The earlier memories of the user that a message of this conversation changes (service/memory/changes.py:
        a change word, the same slot): id -> the id of the window that holds the message. Earlier = accepted before
        this conversation, or from an earlier message of it: a replay, or a job that runs late, supersedes nothing
        newer than itself."""
        calibration = self.calibration
        position = {source_id(i, m): i for i, m in enumerate(messages)}
        out: dict[str, str] = {}
        for i, message in enumerate(messages):
            # a user's own statements to the agent; a transcript's labelled lines ("Caroline: ...") are a record of
            # what people said to each other, where chatter and corrections are not told apart without an LLM
            if message.role != "user" or speaker_label(message.content) or not changes.changes(message.content):
                continue
            mine = source_id(i, message)
            covering = {m.id: m for m in memories if mine in m.source_message_ids}
            window = next((m for m in covering.values() if m.category == INTERACTION), None)
            if window is None:
                continue
            text = message.content
            [vector] = await self.embedder.embed([message.content])
            [hits] = await self.vectors.rank([RankRequest(
                MemoryFilter(user_id=job.user_id, project_id=job.project_id, active_only=True), CHANGE_CANDIDATES,
                vector=vector)])
            earlier = [m for m in await self.vectors.get([mid for mid, _ in hits if mid not in covering])
                       if m.superseded_by is None and m.id not in out
                       and (m.created_at < job.accepted_at if m.task_id != task_id
                            else max((position.get(s, i) for s in m.source_message_ids), default=i) < i)]
            said = {m.id: s for m in earlier if (s := changes.said_by(m.content, None))}  # the user's own words
            if not said:
                continue
            others = await self.embedder.embed(list(said.values()))  # the message's own vector is `vector`
            for (old_id, old_text), other in zip(said.items(), others, strict=True):
                cosine = sum(a * b for a, b in zip(vector, other, strict=True))
                if changes.same_slot(text, old_text, cosine, calibration):
                    out[old_id] = window.id
        if out:
            log.info("conversation_changes", superseded=len(out), user_id=job.user_id)
        return out

    async def _corrections(self, task_id: str, job: ConversationJob, messages: list[Message], drafts: Drafts
                           ) -> dict[str, str]:
        """An explicit correction of an amount ("actually, make that 80 dollars") the extractor kept no fact
        for becomes the corrected preference: the latest earlier preference with an amount (of this conversation,
        else stored), with the new amount, its kind and applies_to. It supersedes that very one: a draft of this
        conversation is marked here; the stored ones to mark are returned (id -> the correction's id)."""
        stored_targets: dict[str, str] = {}
        for index, amount in preferences.corrections(messages):
            if any(amount.casefold() in m.content.casefold() for m in drafts.memories):
                continue  # the extractor stated it already
            at = next((i for i in reversed(range(len(drafts.memories)))
                       if drafts.memories[i].category == preferences.PREFERENCE
                       and drafts.memories[i].superseded_by is None
                       and preferences.MONEY.search(drafts.memories[i].content)
                       and (not drafts.sources[i] or min(drafts.sources[i]) <= index)), None)
            earlier = drafts.memories[at] if at is not None else None
            new_id = memory_id_for(task_id, len(drafts.memories))
            if earlier is None:
                # active, or superseded by this very correction (a replay of this job: it chooses the same one)
                stored = [m for m in await scroll_all(self.vectors, MemoryFilter(
                    user_id=job.user_id, project_id=job.project_id, categories=(preferences.PREFERENCE,)))
                    if m.task_id != task_id and m.superseded_by in (None, new_id)
                    and preferences.MONEY.search(m.content)]
                earlier = max(stored, key=preferences.newness, default=None)
            if earlier is None:
                continue
            memory = preferences.corrected(
                earlier, amount, id=new_id, task_id=task_id,
                at=job.accepted_at, occurred_at=first_time([index], messages, job.accepted_at), source=[])
            if memory is None:
                continue
            drafts.add(memory.model_copy(update={"agent_id": job.agent_id, "metadata": dict(job.metadata)}),
                       [index], None, fact=True)
            if drafts.memories[-1].id != new_id:
                continue  # it repeats a memory of this conversation, which stays as it is
            if at is not None:
                drafts.memories[at] = earlier.model_copy(update={"superseded_by": new_id,
                                                                 "superseded_at": job.accepted_at})
            else:
                stored_targets[earlier.id] = new_id
        return stored_targets
