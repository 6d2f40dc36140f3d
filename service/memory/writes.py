"""Writes: the API side (validate, enqueue a typed job) and the worker side (extract, embed, write both
stores through the outbox; update and delete under the memory's lock)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

from service.ai.extraction import ExtractedFact, ExtractionResult
from service.conversations.service import erase_after_delete, keep_messages, session_of
from service.domain import (
    Memory,
    Message,
    Scope,
    check_category,
    content_hash,
    iso,
    memory_id_for,
    normalise,
    resolve_scope,
)
from service.errors import DomainError, NotFound, PayloadTooLarge
from service.jobs import ConversationJob, DeleteJob, RawBatchJob, RawItem, RawJob, UpdateJob
from service.memory.base import MemoryBase
from service.memory.windows import (
    Window,
    first_time,
    interaction_windows,
    source_ids,
    valid_indexes,
)
from service.metrics import STAGE, timed
from service.queue import now_iso
from service.schemas import (
    AcceptedResponse,
    BulkDeleteRequest,
    ConversationRequest,
    MemoryOut,
    RawBatchRequest,
    RawMemoryItem,
    RawMemoryRequest,
    UpdateMemoryRequest,
)
from service.stores.graph import (
    EntityRef,
    MemoryLinks,
    RelationRef,
)

log = structlog.get_logger(__name__)
_T = TypeVar("_T")
INTERACTION = "interaction"


class _Drafts:
    """The memories of one conversation as they are collected. What repeats an earlier memory (same
    content hash, scope and project; or a window whose text is a fact's content) is not stored twice:
    its messages join the earlier memory's sources, which keeps its own time."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.memories: list[Memory] = []
        self.sources: list[set[int]] = []
        self.links: list[MemoryLinks | None] = []
        self._keys: dict[tuple[str, str, str | None], int] = {}
        self._facts: dict[str, int] = {}  # content hash of a fact -> its position

    def add(self, memory: Memory, sources: list[int], links: MemoryLinks | None, *,
            fact: bool = False, alias: str | None = None) -> None:
        """`links` None: found by the LinkFinder when finished. `alias`: another content hash that
        counts as the same text as a fact (a one-message window's bare text)."""
        at = self._keys.get((memory.hash, memory.scope.value, memory.project_id))
        if at is None and not fact:
            at = next((self._facts[h] for h in (memory.hash, alias) if h is not None and h in self._facts), None)
        if at is not None:
            self.sources[at].update(sources)
            return
        self._keys[(memory.hash, memory.scope.value, memory.project_id)] = len(self.memories)
        if fact:
            self._facts.setdefault(memory.hash, len(self.memories))
        self.memories.append(memory)
        self.sources.append(set(sources))
        self.links.append(links)

    def finish(self, links_of: Callable[[Memory], MemoryLinks]) -> tuple[list[Memory], list[MemoryLinks]]:
        """The memories with their source message ids, and their graph links."""
        memories = [m.model_copy(update={"source_message_ids": source_ids(s, self.messages)})
                    for m, s in zip(self.memories, self.sources, strict=True)]
        links = [found if found is not None else links_of(m) for m, found in zip(memories, self.links, strict=True)]
        return memories, links


def _single_text(window: Window, messages: list[Message]) -> str | None:
    """The content hash of a one-message window's bare text (what a fact repeating it would hash to)."""
    return content_hash(messages[window.indexes[0]].content) if len(window.indexes) == 1 else None



class MemoryWrites(MemoryBase):
    # ------------------------------------------------------------------ writes (API side)

    async def submit_raw(self, req: RawMemoryRequest, user_id: str) -> AcceptedResponse:
        item, identity = self._raw_item(req, user_id)
        job = RawJob(user_id=user_id, **item.model_dump())
        return self._accepted(await self.tasks.enqueue(job, identity))

    async def submit_raw_batch(self, req: RawBatchRequest, user_id: str) -> AcceptedResponse:
        """Several facts of one user as one task. An item that repeats an earlier one of the batch (the identity a
        single write is deduplicated by) is stored once; the batch's identity is its items' identities."""
        items: dict[str, RawItem] = {}
        for i, raw in enumerate(req.memories):
            if "fold_key" in raw.metadata:
                raise DomainError(f"memories[{i}]: metadata.fold_key folds one write into the session's previous one; "
                                  "send it to POST /v1/memories/raw")
            try:
                item, identity = self._raw_item(raw, user_id)
            except (DomainError, PayloadTooLarge) as exc:
                raise type(exc)(f"memories[{i}]: {exc}") from exc
            items.setdefault(json.dumps(identity, sort_keys=True), item)
        job = RawBatchJob(user_id=user_id, items=list(items.values()))
        return self._accepted(await self.tasks.enqueue(job, {"user_id": user_id, "items": list(items)}))

    def _raw_item(self, req: RawMemoryItem, user_id: str) -> tuple[RawItem, dict[str, Any]]:
        """A raw write as it is stored, and the identity a retried identical write is recognised by."""
        self.check_content(req.content)
        scope = resolve_scope(req.category, req.scope, req.project_id)
        project_id = req.project_id if scope is Scope.PROJECT else None
        identity = {
            "user_id": user_id,
            "scope": scope.value,
            "project_id": project_id,
            "category": req.category,
            "content": normalise(req.content),
        }
        occurred_at = iso(req.occurred_at) if req.occurred_at is not None else None
        if occurred_at is not None:  # the same words at another time are another event
            identity["occurred_at"] = occurred_at
        item = RawItem(scope=scope.value, project_id=project_id, category=req.category, content=req.content,
                       agent_id=req.agent_id, metadata=req.metadata or {}, occurred_at=occurred_at)
        return item, identity

    async def submit_conversation(self, req: ConversationRequest, user_id: str) -> AcceptedResponse:
        total = sum(len(m.content) for m in req.messages)
        limit = self.settings.max_conversation_chars
        if total > limit:
            raise PayloadTooLarge(
                f"conversation has {total} characters; the limit is {limit} (MAX_CONVERSATION_CHARS)"
            )
        if not any(m.role == "user" and m.content.strip() for m in req.messages):
            raise DomainError("messages holds no non-empty 'user' message; facts are extracted from user turns")
        messages = [m.model_dump(mode="json") for m in req.messages]
        identity = {
            "user_id": user_id,
            "project_id": req.project_id,
            # id and timestamp only when given, so a conversation without them hashes as before
            "messages": [[m["role"], normalise(m["content"])]
                         + ([m["id"], m["timestamp"]] if m["id"] is not None or m["timestamp"] is not None else [])
                         for m in messages],
        }
        session_id = session_of(req.session_id, req.metadata or {})
        if session_id is not None:  # the same messages in another session are another write
            identity["session_id"] = session_id
        job = ConversationJob(user_id=user_id, project_id=req.project_id, agent_id=req.agent_id,
                              metadata=req.metadata or {}, messages=messages, session_id=session_id)
        return self._accepted(await self.tasks.enqueue(job, identity))

    # ------------------------------------------------------------------ writes (worker side)

    async def store_conversation(self, task_id: str, job: ConversationJob) -> dict[str, Any]:
        """Extract facts and store each as a raw write would, plus its entities and relations; store every
        message verbatim in `interaction` windows (service/memory/windows.py) beside them, so nothing said is
        lost. Memory ids are positions: facts first, then windows in message order."""
        messages = [Message.model_validate(m) for m in job.messages]
        # A replayed job reuses the first extraction: an LLM may not answer the same twice,
        # and memory ids are positions in this list.
        cached = await self.tasks.load_step(task_id, "extraction")
        if cached is not None:
            extraction = ExtractionResult.model_validate_json(cached)
        else:
            with timed(STAGE, stage="extract"):  # LLM calls and tokens are counted per call by the Gemini client
                extraction = await self.extractor.extract(messages, job.project_id)
            await self.tasks.save_step(task_id, "extraction", extraction.model_dump_json())
        drafts = _Drafts(messages)
        for fact in extraction.facts:
            sources = valid_indexes(fact.source_messages, len(messages))
            memory = self._fact_memory(task_id, len(drafts.memories), fact, job,
                                       first_time(sources, messages, job.accepted_at))
            drafts.add(memory, sources, MemoryLinks(
                memory_id=memory.id,
                entities=[EntityRef(e.name, e.type) for e in fact.entities],
                relations=[
                    RelationRef(r.subject, r.predicate, r.object, r.fact, fact.valid_at) for r in fact.relations
                ],
            ), fact=True)
        facts = len(drafts.memories)
        # Every message is kept verbatim in an interaction window, the facts beside them: a fact is a rewording
        # of part of a message, and on the LoCoMo dev split keeping the words raises R@10 from 0.47 to 0.71
        # (docs/retrieval.md, "The conversation path").
        for window in interaction_windows(messages, (), self.settings.interaction_window_messages):
            memory = self._window_memory(task_id, len(drafts.memories), window, messages, job)
            drafts.add(memory, list(window.indexes), None, alias=_single_text(window, messages))
        memories, links = drafts.finish(self.links_of)
        graph = await self.write_memories(task_id, memories, links) if memories else "stored"
        session = await keep_messages(self.settings, self.tasks, self.graph, task_id, job.user_id, job.session_id,
                                      job.project_id, job.accepted_at, messages, memories)
        log.info("conversation_extracted", extractor=extraction.extractor, facts=facts,
                 interactions=len(memories) - facts, dropped=extraction.dropped, tokens=extraction.usage.total_tokens)
        return {
            "memories": [MemoryOut.of(m).model_dump(mode="json") for m in memories],
            "graph": graph,
            "extractor": extraction.extractor,
            "usage": extraction.usage.model_dump(),
            "dropped": extraction.dropped,
            "session_id": session,
        }

    def _fact_memory(
        self, task_id: str, index: int, fact: ExtractedFact, job: ConversationJob, occurred_at: str
    ) -> Memory:
        project_id = job.project_id
        # A project-default fact from a conversation without a project_id is kept as global
        # rather than dropped (docs/decisions.md).
        wanted = fact.scope or (None if project_id else Scope.GLOBAL)
        scope = resolve_scope(fact.category, wanted, project_id)
        metadata = dict(job.metadata)
        if fact.valid_at:
            metadata["valid_at"] = fact.valid_at
        return Memory(
            id=memory_id_for(task_id, index),
            user_id=job.user_id,
            content=fact.content,
            category=fact.category,
            scope=scope,
            project_id=project_id if scope is Scope.PROJECT else None,
            agent_id=job.agent_id,
            hash=content_hash(fact.content),
            metadata=metadata,
            created_at=job.accepted_at,
            updated_at=job.accepted_at,
            task_id=task_id,
            occurred_at=occurred_at,
        )

    @staticmethod
    def _window_memory(
        task_id: str, index: int, window: Window, messages: list[Message], job: ConversationJob
    ) -> Memory:
        """An `interaction` memory of consecutive messages, verbatim (scope: the category's flexible rule); its
        time is the first of its messages' timestamps that parses, as for a fact."""
        scope = resolve_scope(INTERACTION, None, job.project_id)
        return Memory(
            id=memory_id_for(task_id, index),
            user_id=job.user_id,
            content=window.content,
            category=INTERACTION,
            scope=scope,
            project_id=job.project_id if scope is Scope.PROJECT else None,
            agent_id=job.agent_id,
            hash=content_hash(window.content),
            metadata=dict(job.metadata),
            created_at=job.accepted_at,
            updated_at=job.accepted_at,
            task_id=task_id,
            occurred_at=first_time(window.indexes, messages, job.accepted_at),
        )

    async def store_raw(self, task_id: str, job: RawJob) -> dict[str, Any]:
        """Embed and write one memory to both stores. Ids and timestamps come from the job,
        so a replay writes the very same point and node."""
        memory = self._raw_memory(task_id, 0, job.user_id, job, job.accepted_at)
        folded = await self._fold(task_id, job)
        if folded is not None:
            return folded
        graph = await self.write_memories(task_id, [memory], [self.links_of(memory)])
        session, fold_key = job.metadata.get("session_id"), job.metadata.get("fold_key")
        if isinstance(session, str) and session and isinstance(fold_key, str) and fold_key:
            await self.tasks.set_json(self._fold_pointer(job, session),
                                      {"fold_key": fold_key, "memory_id": memory.id, "count": 1, "last_task": task_id})
        return {"memories": [MemoryOut.of(memory).model_dump(mode="json")], "graph": graph}

    async def store_raw_batch(self, task_id: str, job: RawBatchJob) -> dict[str, Any]:
        """The batch's memories, written together: one embedding batch, one vector upsert, one graph upsert."""
        memories = [self._raw_memory(task_id, i, job.user_id, item, job.accepted_at)
                    for i, item in enumerate(job.items)]
        graph = await self.write_memories(task_id, memories, [self.links_of(m) for m in memories])
        return {"memories": [MemoryOut.of(m).model_dump(mode="json") for m in memories], "graph": graph}

    @staticmethod
    def _raw_memory(task_id: str, index: int, user_id: str, item: RawItem, accepted_at: str) -> Memory:
        return Memory(
            id=memory_id_for(task_id, index),
            user_id=user_id,
            content=item.content,
            category=item.category,
            scope=Scope(item.scope),
            project_id=item.project_id,
            agent_id=item.agent_id,
            hash=content_hash(item.content),
            metadata=item.metadata,
            created_at=accepted_at,
            updated_at=accepted_at,
            task_id=task_id,
            occurred_at=item.occurred_at or accepted_at,
        )

    def links_of(self, memory: Memory) -> MemoryLinks:
        """Graph side of a raw write, an update or an interaction window: the injected LinkFinder (no LLM).
        A window gets mentions only: its "I" may be the assistant, so first-person relations would lie."""
        entities, relations = self.links.find(memory.content, memory.category, memory.project_id)
        if memory.category == INTERACTION and memory.source_message_ids:
            relations = []
        valid_at = memory.metadata.get("valid_at") if isinstance(memory.metadata.get("valid_at"), str) else None
        return MemoryLinks(
            memory_id=memory.id,
            entities=[EntityRef(e.name, e.type) for e in entities],
            relations=[RelationRef(r.subject, r.predicate, r.object, r.fact, valid_at) for r in relations],
        )

    async def apply_update(self, task_id: str, job: UpdateJob) -> dict[str, Any]:
        """Re-embed the new content and re-ingest it into the graph (contradicted edges invalidated).
        Under the memory's lock: an update never interleaves with a delete or a dedup removal."""
        async with self.locks.hold([job.memory_id]):
            [current] = await self._existing([job.memory_id], job.user_id)
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
        pointer = await self.tasks.get_json(self._fold_pointer(job, session))
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
        await self.tasks.set_json(self._fold_pointer(job, session),
                                  {**pointer, "count": count, "last_task": task_id})
        return {**result, "folded": True, "count": count}

    @staticmethod
    def _fold_pointer(job: RawJob, session: str) -> str:
        return f"fold:{job.user_id}:{job.project_id or '-'}:{session}"

    async def apply_delete(self, task_id: str, job: DeleteJob) -> dict[str, Any]:
        """Remove vectors, mark (:Memory) nodes deleted, expire edges no live memory supports.
        The ids are resolved once and kept with the task (and the outbox), so a retry or the
        reconciler finishes the graph part."""
        cached = await self.tasks.load_step(task_id, "targets")
        if cached is not None:
            ids: list[str] = json.loads(cached)
        else:
            ids = await self._delete_targets(job)
            await self.tasks.save_step(task_id, "targets", json.dumps(ids))
        everything = job.memory_ids is None and all(
            v is None for v in (job.scope, job.category, job.project_id, job.agent_id))
        if not ids:
            if everything:
                await self.graph.erase_tiers(job.user_id, job.accepted_at)  # the user's runs and sessions too
            return {"deleted": [], "expired_edges": [], "graph": "stored"}
        async with self.locks.hold(ids):
            expired = await self.ledger.remove(task_id, job.user_id, ids, job.accepted_at)
            await self.tasks.erase(ids)
        # the messages these memories came from (and with everything, the user's runs and sessions): now, or
        # when the graph is back if its half of the delete is pending (service/conversations/service.py)
        await erase_after_delete(self.settings, self.tasks, self.graph, job.user_id, ids, everything,
                                 job.accepted_at, graph_done=expired is not None)
        log.info("memories_deleted", count=len(ids), expired_edges=len(expired or []))
        return {"deleted": ids, "expired_edges": expired or [], "graph": "stored" if expired is not None else "pending"}

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
                found |= {str(n["id"]) for n in await self.graph.memory_nodes(user_id, rest) if not n.get("deleted_at")}
            return [i for i in job.memory_ids if i in found]
        flt = self._list_filter(user_id, job.scope, job.category, job.project_id, job.agent_id, all_scopes=True)
        ids: list[str] = []
        cursor: str | None = None
        for _ in range(10_000):  # bounded: 10,000 pages of 500
            page, cursor = await self.vectors.scroll(flt, 500, cursor)
            # never delete what was written after the request was accepted
            ids += [m.id for m in page if m.created_at <= job.accepted_at]
            if cursor is None:
                break
        return ids


    async def submit_update(self, memory_id: str, req: UpdateMemoryRequest, user_id: str | None) -> AcceptedResponse:
        self.check_content(req.content)
        [current] = await self._existing([memory_id], user_id)
        if req.category is not None:
            check_category(req.category)
        identity = {"memory_id": memory_id, "content": normalise(req.content), "category": req.category}
        job = UpdateJob(memory_id=memory_id, user_id=current.user_id, content=req.content, category=req.category)
        return self._accepted(await self.tasks.enqueue(job, identity))

    async def submit_delete(self, memory_id: str, user_id: str | None) -> AcceptedResponse:
        owner = await self._owner_for_delete(memory_id, user_id)
        job = DeleteJob(user_id=owner, memory_ids=[memory_id])
        return self._accepted(await self.tasks.enqueue(job, {"user_id": owner, "memory_ids": [memory_id]}))

    async def _owner_for_delete(self, memory_id: str, user_id: str | None) -> str:
        """The owner of a memory to delete: from its vector, or (a delete that stopped half-way, the
        vector gone) from its live graph node, so a retried DELETE is accepted and finishes the job."""
        found = await self.vectors.get([memory_id])
        if found and (user_id is None or found[0].user_id == user_id):
            return found[0].user_id
        if not found and user_id is not None:
            if await self.outbox.tombstoned(user_id, [memory_id]):
                return user_id
            nodes = await self.graph.memory_nodes(user_id, [memory_id])
            if nodes and not nodes[0].get("deleted_at"):
                return user_id
        raise NotFound(f"unknown memory id '{memory_id}'")

    async def submit_bulk_delete(self, req: BulkDeleteRequest, user_id: str) -> AcceptedResponse:
        has_filter = any(v is not None for v in (req.scope, req.category, req.project_id, req.agent_id))
        if req.memory_ids is None and not has_filter and not req.all:
            raise DomainError("give memory_ids, a filter (scope, category, project_id, agent_id) or all=true")
        if req.memory_ids is not None and has_filter:
            raise DomainError("give either memory_ids or filters, not both")
        if req.category is not None:
            check_category(req.category)
        payload = {**req.model_dump(mode="json", exclude={"all"}), "user_id": user_id}
        job = DeleteJob(**payload)
        return self._accepted(await self.tasks.enqueue(job, payload))


    async def write_memories(self, task_id: str, memories: list[Memory], links: list[MemoryLinks]) -> str:
        """Both stores, intent first: returns "stored" when the graph holds them too, "pending" when
        the graph half waits in the outbox for the reconciler (the memories are searchable already)."""
        stored_at = now_iso()
        memories = [m.model_copy(update={"stored_at": stored_at}) for m in memories]
        done = await self.ledger.store(task_id, memories, links, self.embedder.embed)
        log.info("memories_written", count=len(memories), ids=[m.id for m in memories], graph=done)
        return "stored" if done else "pending"
