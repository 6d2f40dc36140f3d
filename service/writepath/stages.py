"""The stages of a memory write in the worker, each a small object with a narrow input and output. The writers of
service/writepath/writes.py run them top to bottom:

    extract (Extract) -> draft (Draft: facts, corrections, interaction windows, links) -> store (Store: both stores
    through the ledger, then the preference slots) -> supersede (Changes finds what the messages changed, Supersede
    marks it) -> messages (Messages: the conversation tier) -> status (the job's result; worker/jobs.py records it)

An update and a fold rewrite one memory (Rewrite); a delete has its own steps (writes.py `DeleteWrite`). Every store
write goes through the ledger (service/ledger/ledger.py), the dual-store owner these stages end in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog

from service.ai.embeddings import Embedder
from service.ai.extraction import KNOWN_CHARS, KNOWN_MEMORIES, ExtractionResult, Extractor, KnownMemory, LinkFinder
from service.conversations.writes import keep_messages
from service.core.domain import Memory, MemoryOut, Message, content_hash, memory_id_for, now_iso
from service.core.embedding_models import Calibration
from service.core.kv import RedisKV
from service.core.metrics import STAGE, WRITE_EMBED_CALLS, WRITE_EMBED_TEXTS, timed
from service.core.settings import AccessSettings, RedisQueueSettings, SearchSettings
from service.ledger.ledger import Embed, Ledger
from service.ledger.links import structured_links
from service.ledger.outbox import MemoryLocks
from service.memory import changes, preferences
from service.memory.drafts import INTERACTION, Drafts, fact_memory, single_text, window_memory
from service.memory.rules import scroll_all
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
from service.stores.graph import EntityRef, MemoryLinks, RelationRef
from service.stores.tiers import ConversationStore
from service.stores.vector import MemoryFilter, RankRequest, VectorStore
from service.tasks.jobs import ConversationJob
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)

CHANGE_CANDIDATES = 10  # the memories nearest a changing message that are checked for its slot


def counted(embedder: Embedder, stage: str) -> Embed:
    """`embedder.embed`, counted per call and per text under `stage` (memory_write_embed_calls_total,
    memory_write_embedded_texts_total): how many times a write embeds, and what (scripts/bench/write_path.py)."""
    async def embed(texts: list[str]) -> list[list[float]]:
        WRITE_EMBED_CALLS.labels(stage=stage).inc()
        WRITE_EMBED_TEXTS.labels(stage=stage).inc(len(texts))
        return await embedder.embed(texts)

    return embed


class Linker:
    """The graph side of a memory the extractor did not link (a raw write, an update, an interaction window): the
    injected LinkFinder (no LLM). A window gets mentions only: its "I" may be the assistant, so first-person
    relations would lie. A structured write's memory (service/graph_api/) carries its links in `metadata.graph`."""

    def __init__(self, links: LinkFinder) -> None:
        self.links = links

    def __call__(self, memory: Memory) -> MemoryLinks:
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


class Extract:
    """messages -> facts (the extractor). A replayed job reuses the first extraction (kept as the task's step): an
    LLM may not answer the same twice, and memory ids are positions in its list. An LLM is shown the user's stored
    memories the conversation may change, and names those a fact replaces."""

    def __init__(self, kv: RedisKV, extractor: Extractor, embedder: Embedder, vectors: VectorStore) -> None:
        self.kv = kv
        self.extractor = extractor
        self.embed = counted(embedder, "known")
        self.vectors = vectors

    async def run(self, task_id: str, job: ConversationJob, messages: list[Message]) -> ExtractionResult:
        cached = await self.kv.load_step(task_id, "extraction")
        if cached is not None:
            return ExtractionResult.model_validate_json(cached)
        # the cached extraction keeps the replaced ids: a replay needs no lookup
        known = await self._known(task_id, job, messages) if self.extractor.names_replacements else []
        with timed(STAGE, stage="extract"):  # LLM calls and tokens are counted per call by the Gemini client
            extraction = await self.extractor.extract(messages, job.project_id, known)
        await self.kv.save_step(task_id, "extraction", extraction.model_dump_json())
        return extraction

    async def _known(self, task_id: str, job: ConversationJob, messages: list[Message]) -> list[KnownMemory]:
        """The user's stored memories nearest what the user says in this conversation (at most KNOWN_MEMORIES, each
        cut to KNOWN_CHARS): what an LLM extractor may say a fact replaces. Earlier ones only: a replay or a job
        that runs late is never shown memories newer than itself."""
        said = " ".join(m.content for m in messages if m.role == "user")[:4000]
        if not said.strip():
            return []
        [vector] = await self.embed([said])
        [hits] = await self.vectors.rank([RankRequest(
            MemoryFilter(user_id=job.user_id, project_id=job.project_id, active_only=True), 2 * KNOWN_MEMORIES,
            vector=vector)])
        found = {m.id: m for m in await self.vectors.get([mid for mid, _ in hits])}
        earlier = [found[mid] for mid, _ in hits if mid in found and found[mid].task_id != task_id
                   and found[mid].created_at < job.accepted_at and found[mid].superseded_by is None]
        return [KnownMemory(id=m.id, content=m.content[:KNOWN_CHARS],
                            said=days(m.occurred_at, m.created_at, m.metadata)[0])
                for m in earlier[:KNOWN_MEMORIES]]


@dataclass
class Drafted:
    """What a conversation will store: its memories (facts first, then the interaction windows in message order) with
    their links, and the stored memories it supersedes (id -> the id of the memory that does)."""

    memories: list[Memory]
    links: list[MemoryLinks]
    facts: int
    replaced: dict[str, str] = field(default_factory=dict)  # what the model said the facts replace
    corrected: dict[str, str] = field(default_factory=dict)  # stored preferences an explicit correction changes


class Draft:
    """facts + messages -> the memories to store. Every message is kept verbatim in an interaction window, the facts
    beside them: a fact is a rewording of part of a message, and the words themselves are what many questions later
    match (docs/retrieval.md, "The conversation path")."""

    def __init__(self, search: SearchSettings, access: AccessSettings, vectors: VectorStore, linker: Linker) -> None:
        self.search = search  # TIME_ANCHORING
        self.access = access  # INTERACTION_WINDOW_MESSAGES
        self.vectors = vectors  # the stored preference an explicit correction changes
        self.linker = linker

    async def run(self, task_id: str, job: ConversationJob, messages: list[Message], extraction: ExtractionResult
                  ) -> Drafted:
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
        for window in interaction_windows(messages, (), self.access.interaction_window_messages):
            memory = window_memory(task_id, len(drafts.memories), window, messages, job, anchored)
            drafts.add(memory, list(window.indexes), None, alias=single_text(window, messages))
        memories, links = drafts.finish(self.linker)
        return Drafted(memories, links, facts, replaced, corrected)

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


class Supersede:
    """Marks memories superseded, with history kept: the payload changes, the vector is not recomputed."""

    def __init__(self, vectors: VectorStore, ledger: Ledger, locks: MemoryLocks) -> None:
        self.vectors = vectors
        self.ledger = ledger
        self.locks = locks

    async def mark(self, superseded: dict[str, str]) -> list[str]:
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

    async def slots(self, memories: list[Memory]) -> list[str]:
        """Mark every active preference of the new memories' slots that is not its slot's newest (older ones; or
        a memory of this job, when a write accepted later already ran; service/memory/preferences.py). The ids
        marked."""
        new = [m for m in memories if preferences.slot(m) is not None and m.superseded_by is None]
        slots = {preferences.slot(m) for m in new}
        marked: list[str] = []
        for user_id, scope, project_id in sorted({(m.user_id, m.scope, m.project_id) for m in new},
                                                 key=lambda k: (k[0], k[1].value, k[2] or "")):
            flt = MemoryFilter(user_id=user_id, scope=scope, project_id=project_id,
                               categories=(preferences.PREFERENCE,), active_only=True)
            active = [m for m in await scroll_all(self.vectors, flt) if m.project_id == project_id]
            marked += await self.mark({m.id: by for m, by in preferences.to_supersede(active)
                                       if preferences.slot(m) in slots})
        return marked


class Store:
    """memories + links -> both stores, intent first (the ledger), then the preference slots they settle."""

    def __init__(self, ledger: Ledger, embedder: Embedder, supersede: Supersede) -> None:
        self.ledger = ledger
        self.embed = counted(embedder, "store")
        self.supersede = supersede

    async def run(self, task_id: str, memories: list[Memory], links: list[MemoryLinks]) -> dict[str, Any]:
        """The task result's graph part: `graph` "stored" when the graph holds them too, with the entities the write
        named (each with the gate's decision and the entity it ended as), `entity_count` and `relation_count`;
        "pending" when the graph half waits in the outbox for the reconciler (the memories are searchable already;
        no entities yet)."""
        stored_at = now_iso()
        memories = [m.model_copy(update={"stored_at": stored_at}) for m in memories]
        memories = preferences.within_job(memories, stored_at)
        report = await self.ledger.store(task_id, memories, links, self.embed)
        superseded = await self.supersede.slots(memories)
        log.info("memories_written", count=len(memories), ids=[m.id for m in memories], graph=report is not None,
                 superseded=superseded)
        if report is None:
            return {"graph": "pending", "entities": [], "entity_count": 0, "relation_count": 0}
        return {"graph": "stored", **report.summary()}


class Rewrite:
    """New content for an existing memory in both stores: an update, or a fold of a repeated observation (the caller
    holds the memory's lock)."""

    def __init__(self, ledger: Ledger, embedder: Embedder, linker: Linker) -> None:
        self.ledger = ledger
        self.embed = counted(embedder, "rewrite")
        self.linker = linker

    async def run(self, task_id: str, current: Memory, content: str, category: str, metadata: dict[str, Any],
                  accepted_at: str) -> dict[str, Any]:
        updated = current.model_copy(update={
            "content": content, "category": category, "hash": content_hash(content), "metadata": metadata,
            "updated_at": accepted_at, "task_id": task_id, "stored_at": now_iso(),
        })
        invalidated = await self.ledger.replace(task_id, updated, self.linker(updated), accepted_at, self.embed)
        log.info("memory_updated", memory_id=updated.id, invalidated_edges=len(invalidated or []))
        return {"memories": [MemoryOut.of(updated).model_dump(mode="json")], "invalidated_edges": invalidated or [],
                "graph": "stored" if invalidated is not None else "pending"}


class Changes:
    """messages + the stored memories -> what the messages changed (service/memory/changes.py: a change word, the
    same slot): id -> the id of the window that holds the changing message. Earlier = accepted before this
    conversation, or from an earlier message of it: a replay, or a job that runs late, supersedes nothing newer than
    itself. Each changing message is embedded once."""

    def __init__(self, embedder: Embedder, vectors: VectorStore, calibration: Calibration) -> None:
        self.embed = counted(embedder, "changes")
        self.vectors = vectors
        self.calibration = calibration  # the embedding model's thresholds

    async def run(self, task_id: str, job: ConversationJob, messages: list[Message], memories: list[Memory]
                  ) -> dict[str, str]:
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
            [vector] = await self.embed([message.content])
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
            others = await self.embed(list(said.values()))  # the message's own vector is `vector`
            for (old_id, old_text), other in zip(said.items(), others, strict=True):
                cosine = sum(a * b for a, b in zip(vector, other, strict=True))
                if changes.same_slot(text, old_text, cosine, self.calibration):
                    out[old_id] = window.id
        if out:
            log.info("conversation_changes", superseded=len(out), user_id=job.user_id)
        return out


class Messages:
    """A conversation's messages kept verbatim under its session (the conversation tier,
    service/conversations/writes.py); returns the session id (the task id when the write named none)."""

    def __init__(self, redis: RedisQueueSettings, tasks: TaskQueue, conversations: ConversationStore) -> None:
        self.redis = redis
        self.tasks = tasks
        self.conversations = conversations

    async def run(self, task_id: str, job: ConversationJob, messages: list[Message], memories: list[Memory]) -> str:
        return await keep_messages(self.redis, self.tasks, self.conversations, task_id, job.user_id, job.session_id,
                                   job.project_id, job.accepted_at, messages, memories)
