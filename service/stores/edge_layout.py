"""A Qdrant Edge shard directory's layout: its config (the unnamed dense vector and the `bm25` sparse one), its
points and payload indexes, and the repairs made at start before the shard is opened: the one-time migration of a
layout-1 shard, and the undoing of an index swap (`edge_build`) that a crash interrupted."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import qdrant_edge as qe
import structlog

from service.core.domain import Memory
from service.stores.qdrant_common import lexical_vector, memory_of, payload_of, plain_vector
from service.stores.vector import CREATED_FIELD, INDEXED_FIELDS, LEXICAL_VECTOR, POSITION_FIELDS, TIME_FIELD

log = structlog.get_logger(__name__)
SIDECAR = "memory_store.json"
LAYOUT = 2  # 1: one dense vector; 2: + the BM25 sparse vector and the occurred_at index
CHANGES = "changes_since_build"  # the sidecar's count of points written or deleted since the last index build
MIGRATED = "MIGRATED"


def sibling(shard_dir: Path, suffix: str) -> Path:
    """`<dir>.<suffix>`: where a migration or an index build stages its copy."""
    return shard_dir.with_name(f"{shard_dir.name}.{suffix}")


def config(dim: int) -> qe.EdgeConfig:
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
        sparse_vectors={LEXICAL_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
    )


def point(m: Memory, vector: list[float]) -> qe.Point:
    vectors: dict[str, qe.NamedVector] = {"": list(vector)}
    lexical = lexical_vector(m.content)
    if lexical is not None:
        vectors[LEXICAL_VECTOR] = qe.SparseVector(*lexical)
    return qe.Point(m.id, vectors, payload_of(m))


def ensure_indexes(shard: qe.EdgeShard) -> None:
    have = set(shard.info().payload_schema)
    for field in INDEXED_FIELDS:
        if field not in have:
            schema: qe.PayloadSchemaType | qe.KeywordIndexParams = (
                qe.KeywordIndexParams(is_tenant=True) if field == "user_id" else qe.PayloadSchemaType.Keyword
            )
            shard.update(qe.UpdateOperation.create_field_index(field, schema))
    for field in (TIME_FIELD, CREATED_FIELD):  # a shard made before the created_at order gains its index at start
        if field not in have:
            shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Datetime))
    for field in POSITION_FIELDS:
        if field not in have:
            shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Integer))


# A shard made before the lexical retriever (layout 1: one dense vector) cannot gain a sparse vector in
# place (Edge refuses the config), so it is copied once, at start, into a new shard with BM25 vectors
# (and occurred_at = created_at where missing). The old directory is kept beside it as `<dir>.layout1`.
def migrate(shard_dir: Path, dim: int, write_sidecar: Callable[[Path, int], None]) -> None:
    target = shard_dir.with_name(shard_dir.name + ".migrating")
    shutil.rmtree(target, ignore_errors=True)
    old = qe.EdgeShard.load(str(shard_dir))
    new = qe.EdgeShard.create(str(target), config(dim))
    moved, offset = 0, None
    try:
        for _ in range(1_000_000):  # bounded: pages of 1,000
            records, offset = old.scroll(qe.ScrollRequest(offset=offset, limit=1000, with_payload=True,
                                                          with_vector=True))
            points = []
            for r in records:
                memory = memory_of(r.id, r.payload)
                if memory.occurred_at is None:
                    memory = memory.model_copy(update={"occurred_at": memory.created_at})
                points.append(point(memory, plain_vector(r.vector)))
            if points:
                new.update(qe.UpdateOperation.upsert_points(points))
            moved += len(points)
            if offset is None:
                break
        ensure_indexes(new)
        new.flush()
    finally:
        new.close()
        old.close()
    write_sidecar(target, moved)  # a new shard: every point is outside the index
    (target / MIGRATED).touch()
    finish_migration(shard_dir)
    log.info("qdrant_edge_migrated", path=str(shard_dir), layout=LAYOUT, points=moved,
             kept=str(shard_dir.with_name(shard_dir.name + ".layout1")))


def changes_of(stored: dict[str, Any] | None, shard: qe.EdgeShard) -> int:
    """The backlog recorded at the last close; a sidecar written before deletes were counted has the points the
    last build saw instead."""
    if stored is not None and CHANGES in stored:
        return int(stored[CHANGES])
    return max(0, shard.info().points_count - int((stored or {}).get("indexed_points", 0)))


def finish_migration(shard_dir: Path) -> None:
    """Swap a completed migration in (also after a crash between its two renames); drop an unfinished one.
    Also undo an index swap a crash interrupted (`edge_build.IndexBuild.optimize`), and drop a copy left
    half-optimized."""
    old, marker, staged = sibling(shard_dir, "old"), sibling(shard_dir, "swap"), sibling(shard_dir, "next")
    if old.exists() and (marker.exists() or not shard_dir.exists()):
        shutil.rmtree(shard_dir, ignore_errors=True)  # the optimized copy may lack journaled updates
        old.rename(shard_dir)
    marker.unlink(missing_ok=True)
    shutil.rmtree(staged, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    target = shard_dir.with_name(shard_dir.name + ".migrating")
    if not target.exists():
        return
    if not (target / MIGRATED).exists():
        shutil.rmtree(target, ignore_errors=True)
        return
    if shard_dir.exists():
        backup = shard_dir.with_name(shard_dir.name + ".layout1")
        shutil.rmtree(backup, ignore_errors=True)
        shard_dir.rename(backup)
    (target / MIGRATED).unlink()
    target.rename(shard_dir)
