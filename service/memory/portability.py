"""Export and import of one user's memories as NDJSON (docs/portability.md).

An export is a stream of JSON lines, written page by page (nothing of the user is held in memory):

    {"type": "header", "format": "memory-export", "version": 1, "user_id", "project_id", "embedder", "dim",
     "include_vectors", "exported_at", "totals": {"memories": n}}
    {"type": "entity", "entity": {"id", "name", "type", "aliases", "group_id", "created_at", "keys", identity
     state (resolution decision, merge marker and record, rejected names), "same_as": [its own pairs]}}
    {"type": "memory", "memory": {...every stored field...}, "entity_ids": [...], "vector"?: [...]}
    {"type": "fact", "fact": {"id", "source_id", "target_id", "predicate", "fact", "group_id", "valid_at",
     "invalid_at", "expired_at", "memory_ids", "former_memory_ids", "created_at"}}     history included
    {"type": "end", "counts": {"entities", "memories", "facts"}}

Entities come before the memories that mention them and facts after the memories that support them, so an
import can write them in one pass. Import keeps every id (a repeated import changes nothing), writes the
vectors (re-embedding when the file's embedder is not the running one or a line has no vector) and then the
graph, and reports counts and the rejected lines with their reasons.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from pydantic import ValidationError

from service.ai.embeddings import Embedder
from service.core.domain import Memory
from service.core.errors import DomainError
from service.core.kv import RedisKV
from service.ledger.ledger import Ledger
from service.memory.export_format import FORMAT, VERSION, check_header, decode_body
from service.runs.portability import TierImport, export_tiers
from service.stores.graph import GraphStore, RowPage, groups_for
from service.stores.vector import MemoryFilter, VectorRecord
from service.tasks.jobs import ImportJob
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)
PAGE = 500
MAX_REJECTS_LISTED = 100
ImportProgress = Callable[[int, int], Awaitable[None]]


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


class ExportVectors(Protocol):
    async def count(self, flt: MemoryFilter | None = None) -> int: ...

    async def scroll(
        self, flt: MemoryFilter, limit: int, cursor: str | None = None
    ) -> tuple[list[Memory], str | None]: ...

    async def scroll_vectors(
        self, flt: MemoryFilter, limit: int, cursor: str | None = None
    ) -> tuple[list[VectorRecord], str | None]: ...

    async def ping(self) -> None: ...


class Exporter:
    """The export (the read side)."""

    def __init__(self, vectors: ExportVectors, graph: GraphStore, embedder: Embedder) -> None:
        self.vectors = vectors
        self.graph = graph
        self.embedder = embedder  # the write path's: the vectors an export holds are its

    async def export(self, user_id: str, project_id: str | None, include_vectors: bool) -> AsyncIterator[bytes]:
        """The user's memories (with `project_id`: the global ones and that project's), entities and facts."""
        flt = MemoryFilter(user_id=user_id, project_id=project_id, all_scopes=project_id is None)
        groups = groups_for(project_id) if project_id else None
        counts = {"entities": 0, "memories": 0, "facts": 0}
        yield _line({"type": "header", "format": FORMAT, "version": VERSION, "user_id": user_id,
                     "project_id": project_id, "embedder": self.embedder.name, "dim": self.embedder.dim,
                     "include_vectors": include_vectors, "exported_at": datetime.now(UTC).isoformat(),
                     "totals": {"memories": await self.vectors.count(flt)}})
        async for item in _pages(lambda c: self.graph.reads.export_entities(user_id, groups, PAGE, c)):
            counts["entities"] += 1
            yield _line({"type": "entity", "entity": item})
        cursor: str | None = None
        for _ in range(100_000):  # bounded: pages of PAGE
            pairs: list[tuple[Memory, list[float] | None]]
            if include_vectors:
                records, cursor = await self.vectors.scroll_vectors(flt, PAGE, cursor)
                pairs = [(r.memory, r.vector) for r in records]
            else:
                memories, cursor = await self.vectors.scroll(flt, PAGE, cursor)
                pairs = [(m, None) for m in memories]
            mentions = await self.graph.reads.mentions_of(user_id, [m.id for m, _ in pairs]) if pairs else {}
            for memory, vector in pairs:
                counts["memories"] += 1
                line: dict[str, Any] = {"type": "memory", "memory": memory.model_dump(mode="json"),
                                        "entity_ids": mentions.get(memory.id, [])}
                if vector is not None:
                    line["vector"] = vector
                yield _line(line)
            if cursor is None:
                break
        async for item in _pages(lambda c: self.graph.reads.export_facts(user_id, groups, PAGE, c)):
            counts["facts"] += 1
            yield _line({"type": "fact", "fact": item})
        async for tier_line in export_tiers(self.graph, user_id, project_id, counts):  # runs, messages
            yield _line(tier_line)
        yield _line({"type": "end", "counts": counts})


class Importer:
    """The worker side of an import: the uploaded file (held in Redis by the intake) into both stores, through
    the ledger."""

    def __init__(self, tasks: TaskQueue, kv: RedisKV, embedder: Embedder, ledger: Ledger,
                 graph: GraphStore) -> None:
        self.tasks = tasks  # the task's progress
        self.kv = kv  # the upload
        self.embedder = embedder
        self.ledger = ledger
        self.graph = graph  # the runs and messages of the file (not memories: the ledger's are)

    async def run(self, task_id: str, job: ImportJob) -> dict[str, Any]:
        """The import job: the upload's lines, with the task's progress; the upload is dropped once imported."""
        body = await self.kv.load_blob(job.blob)
        if body is None:
            raise DomainError("the uploaded file is gone (uploads are kept for TASK_TTL_SECONDS)")

        async def progress(done: int, total: int) -> None:
            await self.tasks.records.set_progress(task_id, done, total)

        result = await self.import_lines(job.user_id, decode_body(body), progress)
        await self.kv.drop_blob(job.blob)
        return result

    async def import_lines(self, user_id: str, lines: list[str],
                           progress: ImportProgress | None = None) -> dict[str, Any]:
        """Write an export into the stores for `user_id` (the file's user). Returns counts and rejects."""
        header = check_header(next((raw for raw in lines if raw.strip()), ""))
        if header.get("user_id") != user_id:
            raise DomainError("the file holds another user's memories")
        reuse = (header.get("embedder") == self.embedder.name and header.get("dim") == self.embedder.dim)
        imported = {"entities": 0, "memories": 0, "facts": 0, "reembedded": 0, "rejected": 0}
        rejected: list[dict[str, Any]] = []
        entities: list[dict[str, Any]] = []
        memories: list[tuple[Memory, list[float] | None, list[str]]] = []
        facts: list[dict[str, Any]] = []
        same_as: list[dict[str, Any]] = []  # applied once every entity is in (a pair may name a later one)
        merges: list[tuple[str, str]] = []
        total = len(lines)
        tiers = TierImport(self.graph, self.embedder, user_id)  # runs and messages

        def reject(number: int, reason: str) -> None:
            if len(rejected) < MAX_REJECTS_LISTED:
                rejected.append({"line": number, "reason": reason})
            imported["rejected"] += 1

        async def flush(done: int) -> None:
            nonlocal entities, memories, facts
            ready: list[list[float]] = []
            if memories:
                vectors = [v if reuse and v is not None and len(v) == self.embedder.dim else None
                           for _, v, _ in memories]
                missing = [i for i, v in enumerate(vectors) if v is None]
                if missing:
                    fresh = await self.embedder.embed([memories[i][0].content for i in missing])
                    for i, v in zip(missing, fresh, strict=True):
                        vectors[i] = v
                    imported["reembedded"] += len(missing)
                ready = [v for v in vectors if v is not None]
            mentions = [{"memory_id": m.id, "entity_id": e} for m, _, eids in memories for e in eids]
            if entities or memories or facts:
                await self.ledger.import_memories(user_id, [m for m, _, _ in memories], ready, entities, mentions,
                                                  facts)
            imported["entities"] += len(entities)
            imported["memories"] += len(memories)
            imported["facts"] += len(facts)
            entities, memories, facts = [], [], []
            if progress is not None:
                await progress(done, total)

        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as e:
                reject(number, f"not JSON: {e}")
                continue
            kind = obj.get("type") if isinstance(obj, dict) else None
            try:
                if kind == "entity":
                    entity = _entity(obj["entity"])
                    entities.append(entity)
                    same_as += [{"source_id": entity["id"], "target_id": p.pop("target_id"), "props": p}
                                for p in entity.pop("same_as")]
                    if entity["identity"].get("merged_into"):
                        merges.append((entity["id"], str(entity["identity"]["merged_into"])))
                elif kind == "memory":
                    memory = Memory.model_validate(obj.get("memory"))
                    if memory.user_id != user_id:
                        raise ValueError(f"memory {memory.id} belongs to another user")
                    vector = obj.get("vector")
                    memories.append((memory, [float(x) for x in vector] if isinstance(vector, list) else None,
                                     [str(e) for e in obj.get("entity_ids") or []]))
                elif kind == "fact":
                    facts.append(_fact(obj["fact"]))
                elif kind in ("run", "message"):
                    tiers.add(kind, obj)
                elif kind not in ("header", "end"):
                    raise ValueError(f"unknown line type {kind!r}")
            except (ValidationError, ValueError, TypeError, KeyError) as e:
                reject(number, f"{type(e).__name__}: {str(e)[:300]}")
                continue
            if len(memories) >= PAGE or len(entities) >= PAGE or len(facts) >= PAGE:
                await flush(number)
        await flush(total)
        if same_as or merges:
            await self.ledger.import_identity(user_id, same_as, merges)
        imported.update(await tiers.flush())
        log.info("import_done", user_id=user_id, **{k: v for k, v in imported.items()})
        return {"imported": imported, "rejected": rejected, "embedder": self.embedder.name,
                "vectors": "reused" if reuse and not imported["reembedded"] else "re-embedded"}


async def _pages(fetch: Callable[[str | None], Awaitable[RowPage]]) -> AsyncIterator[dict[str, object]]:
    """Every item of a cursor-paged graph listing (bounded: 100,000 pages)."""
    cursor: str | None = None
    for _ in range(100_000):
        page = await fetch(cursor)
        for item in page.items:
            yield item
        cursor = page.next_cursor
        if cursor is None:
            return


# An entity's identity state (docs/identity.md), restored as exported.
IDENTITY_FIELDS = ("description", "attributes", "not_same_as", "roles", "resolution_action", "resolution_score",
                   "resolution_match_type", "resolution_reason", "resolution_target", "resolved_at", "merged_into",
                   "merged_at", "merged_via", "merged_aliases", "merged_keys", "replaced_description")
SAME_AS_FIELDS = ("target_id", "status", "score", "match_type", "reason", "created_at", "reviewed_at", "reviewer")


def _entity(obj: dict[str, Any]) -> dict[str, Any]:
    name = str(obj["name"]).strip()
    if not name:
        raise ValueError("entity without a name")
    identity = {k: obj[k] for k in IDENTITY_FIELDS if obj.get(k) is not None}
    pairs = [{k: v for k, v in p.items() if k in SAME_AS_FIELDS} for p in obj.get("same_as") or []
             if isinstance(p, dict) and p.get("target_id")]
    return {"id": str(obj["id"]), "name": name, "type": str(obj.get("type") or "thing"),
            "aliases": [str(a) for a in obj.get("aliases") or []], "group_id": str(obj["group_id"]),
            "created_at": obj.get("created_at"), "keys": [str(k) for k in obj.get("keys") or []],
            "identity": identity, "same_as": pairs}


def _fact(obj: dict[str, Any]) -> dict[str, Any]:
    for key in ("id", "source_id", "target_id", "predicate", "group_id"):
        if not obj.get(key):
            raise ValueError(f"fact without {key}")
    return {"id": str(obj["id"]), "source_id": str(obj["source_id"]), "target_id": str(obj["target_id"]),
            "predicate": str(obj["predicate"]), "fact": str(obj.get("fact") or ""), "group_id": str(obj["group_id"]),
            "valid_at": obj.get("valid_at"), "invalid_at": obj.get("invalid_at"), "expired_at": obj.get("expired_at"),
            "memory_ids": [str(x) for x in obj.get("memory_ids") or []],
            "former_memory_ids": [str(x) for x in obj.get("former_memory_ids") or []],
            "created_at": obj.get("created_at"),
            "confidence": float(obj["confidence"]) if obj.get("confidence") is not None else None}
