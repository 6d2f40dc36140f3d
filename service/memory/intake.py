"""The API side of writes: validate a request, derive the identity a retried identical request is recognised
by, build the typed job (service/tasks/jobs.py) and enqueue it (service/tasks/queue.py). Nothing here writes a
store; the worker side is service/writepath/writes.py."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from service.conversations.intake import session_of
from service.core.domain import Scope, check_category, iso, normalise, resolve_scope
from service.core.errors import DomainError, NotFound, PayloadTooLarge
from service.core.kv import RedisKV
from service.core.settings import ServiceSettings
from service.ledger.outbox import Outbox
from service.memory.export_format import read_header
from service.memory.preferences import preference_scope
from service.memory.rules import check_content, existing
from service.schemas.memories import (
    AcceptedResponse,
    BulkDeleteRequest,
    ConversationRequest,
    RawBatchRequest,
    RawMemoryItem,
    RawMemoryRequest,
    UpdateMemoryRequest,
)
from service.stores.graph import MemoryNodes
from service.stores.vector import VectorStore
from service.tasks.jobs import ConversationJob, DeleteJob, ImportJob, JobModel, RawBatchJob, RawItem, RawJob, UpdateJob
from service.tasks.queue import TaskQueue


class Intake:
    def __init__(self, service: ServiceSettings, tasks: TaskQueue, kv: RedisKV, vectors: VectorStore,
                 graph: MemoryNodes, outbox: Outbox) -> None:
        self.service = service
        self.tasks = tasks  # accepting, and its Idempotency-Key records (service/api/idempotency.py)
        self.kv = kv  # uploads
        self.vectors = vectors  # owners of the memories an update or a delete names
        self.graph = graph  # the owner of a memory whose delete stopped half-way
        self.outbox = outbox  # its tombstones: the same

    async def _enqueue(self, job: JobModel, identity: dict[str, Any]) -> AcceptedResponse:
        task_id = await self.tasks.enqueue(job, identity)
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/memories/status/{task_id}")

    async def submit_raw(self, req: RawMemoryRequest, user_id: str) -> AcceptedResponse:
        item, identity = self._raw_item(req, user_id)
        return await self._enqueue(RawJob(user_id=user_id, **item.model_dump()), identity)

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
        return await self._enqueue(job, {"user_id": user_id, "items": list(items)})

    def _raw_item(self, req: RawMemoryItem, user_id: str) -> tuple[RawItem, dict[str, Any]]:
        """A raw write as it is stored, and the identity a retried identical write is recognised by."""
        check_content(self.service, req.content)
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
        kind, applies_to = preference_scope(req.category, req.kind, req.applies_to)
        if kind is not None or applies_to:  # the same words about another thing are another preference
            identity["preference"] = json.dumps([kind, applies_to])
        if req.sensitivity is not None:  # only when given, so a write without it hashes as before
            identity["sensitivity"] = req.sensitivity.value
        if req.thread_id is not None:  # the same words at another place of a thread are another message
            identity["thread"] = json.dumps([req.thread_id, req.position])
        item = RawItem(scope=scope.value, project_id=project_id, category=req.category, content=req.content,
                       agent_id=req.agent_id, metadata=req.metadata or {}, occurred_at=occurred_at,
                       pref_kind=kind, applies_to=applies_to,
                       sensitivity=req.sensitivity.value if req.sensitivity is not None else None,
                       thread_id=req.thread_id, position=req.position)
        return item, identity

    async def submit_conversation(self, req: ConversationRequest, user_id: str) -> AcceptedResponse:
        total = sum(len(m.content) for m in req.messages)
        limit = self.service.max_conversation_chars
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
        return await self._enqueue(job, identity)

    async def submit_update(self, memory_id: str, req: UpdateMemoryRequest, user_id: str | None) -> AcceptedResponse:
        check_content(self.service, req.content)
        [current] = await existing(self.vectors, [memory_id], user_id)
        if req.category is not None:
            check_category(req.category)
        identity = {"memory_id": memory_id, "content": normalise(req.content), "category": req.category}
        job = UpdateJob(memory_id=memory_id, user_id=current.user_id, content=req.content, category=req.category)
        return await self._enqueue(job, identity)

    async def submit_delete(self, memory_id: str, user_id: str | None) -> AcceptedResponse:
        owner = await self._owner_for_delete(memory_id, user_id)
        job = DeleteJob(user_id=owner, memory_ids=[memory_id])
        return await self._enqueue(job, {"user_id": owner, "memory_ids": [memory_id]})

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
        return await self._enqueue(DeleteJob(**payload), payload)

    def import_owner(self, body: bytes) -> str | None:
        """The user an uploaded export belongs to (its header's), read before anything is queued."""
        if not body.strip():
            raise DomainError("the body is empty: send an export file (GET /v1/export)")
        return str(read_header(body).get("user_id") or "") or None

    async def submit_import(self, body: bytes, user_id: str) -> AcceptedResponse:
        """Keep the upload in Redis for the worker and queue its import; the same file twice is one task while
        the first is pending."""
        digest = hashlib.sha256(body).hexdigest()
        blob = await self.kv.store_blob(f"import:{digest}", body)
        return await self._enqueue(ImportJob(user_id=user_id, blob=blob), {"user_id": user_id, "import": digest})
