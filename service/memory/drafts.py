"""How a job's memories are built from it: a raw item, an extracted fact, an `interaction` window of
messages, and a conversation's drafts (what repeats an earlier memory of the conversation is stored once).
Ids and times come from the task and the job, so a replayed job builds the very same memories."""

from __future__ import annotations

from collections.abc import Callable

from service.ai.extraction import ExtractedFact
from service.core.domain import Memory, Message, Scope, content_hash, memory_id_for, resolve_scope
from service.core.sensitivity import Sensitivity, of_category, rank
from service.memory.windows import EventTime, Window, event_time, first_time, source_ids
from service.stores.graph import MemoryLinks
from service.tasks.jobs import ConversationJob, RawItem

INTERACTION = "interaction"


class Drafts:
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

    def _tier(self, i: int) -> Sensitivity:
        """A memory's sensitivity; a window holds its messages verbatim, so it is as sensitive as the most
        sensitive memory drawn from any of them (a personal fact's window is private too)."""
        own = self.memories[i].sensitivity
        if self.memories[i].category != INTERACTION:
            return own
        shared = [m.sensitivity for m, s in zip(self.memories, self.sources, strict=True) if s & self.sources[i]]
        return max([own, *shared], key=rank)

    def finish(self, links_of: Callable[[Memory], MemoryLinks]) -> tuple[list[Memory], list[MemoryLinks]]:
        """The memories with their source message ids and positions in the write (`source_write`: the task id),
        and their graph links."""
        memories = [m.model_copy(update={"source_message_ids": source_ids(s, self.messages),
                                          "source_write": m.task_id if s else None,
                                          "source_first": min(s) if s else None,
                                          "source_last": max(s) if s else None,
                                          "sensitivity": self._tier(i)})
                    for i, (m, s) in enumerate(zip(self.memories, self.sources, strict=True))]
        links = [found if found is not None else links_of(m) for m, found in zip(memories, self.links, strict=True)]
        return memories, links


def single_text(window: Window, messages: list[Message]) -> str | None:
    """The content hash of a one-message window's bare text (what a fact repeating it would hash to)."""
    return content_hash(messages[window.indexes[0]].content) if len(window.indexes) == 1 else None


def fact_memory(
    task_id: str, index: int, fact: ExtractedFact, job: ConversationJob, occurred_at: str,
    event: EventTime | None = None,
) -> Memory:
    """A fact's memory; `event` (a time its messages name, service/memory/windows.py `event_time`) adds `said_at`
    and `event_at` to its metadata: a plan keeps the day it is for."""
    project_id = job.project_id
    # A project-default fact from a conversation without a project_id is kept as global
    # rather than dropped (docs/decisions.md).
    wanted = fact.scope or (None if project_id else Scope.GLOBAL)
    scope = resolve_scope(fact.category, wanted, project_id)
    metadata = dict(job.metadata)
    if fact.valid_at:
        metadata["valid_at"] = fact.valid_at
    if event is not None:
        metadata.update(event.metadata())
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
        sensitivity=of_category(fact.category),
    )

def window_memory(
    task_id: str, index: int, window: Window, messages: list[Message], job: ConversationJob,
    anchored: bool = False,
) -> Memory:
    """An `interaction` memory of consecutive messages, verbatim (scope: the category's flexible rule); its
    time is the first of its messages' timestamps that parses, as for a fact (`anchored`: moved to the time a
    message names relative to it, `anchored_time`)."""
    scope = resolve_scope(INTERACTION, None, job.project_id)
    event = event_time(window.indexes, messages, job.accepted_at) if anchored else None
    return Memory(
        id=memory_id_for(task_id, index),
        user_id=job.user_id,
        content=window.content,
        category=INTERACTION,
        scope=scope,
        project_id=job.project_id if scope is Scope.PROJECT else None,
        agent_id=job.agent_id,
        hash=content_hash(window.content),
        metadata={**job.metadata, **(event.metadata() if event is not None else {})},
        created_at=job.accepted_at,
        updated_at=job.accepted_at,
        task_id=task_id,
        occurred_at=event.occurred_at if event is not None else first_time(window.indexes, messages, job.accepted_at),
    )


THREAD_PREFIX = "thread:"  # a raw memory's `source_write`: its thread, apart from conversation writes' task ids


def raw_memory(task_id: str, index: int, user_id: str, item: RawItem, accepted_at: str) -> Memory:
    """A raw write's memory; one given a thread and position is that message of it (`source_write` the thread,
    `source_first` = `source_last` its position), so search finds its neighbouring messages."""
    thread = item.thread_id if item.position is not None else None  # the API gives both or neither
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
        kind=item.pref_kind,
        applies_to=list(item.applies_to),
        sensitivity=of_category(item.category, item.sensitivity),
        source_write=None if thread is None else THREAD_PREFIX + thread,
        source_first=None if thread is None else item.position,
        source_last=None if thread is None else item.position,
    )
