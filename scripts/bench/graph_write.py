"""Bulk graph writes: memories per second through `Neo4jGraphStore.upsert_memories` (UNWIND batches), without and
with the entity resolution gate, beside the local embedder's rate measured in the same run (issue 16's target:
graph writes >= 5x the embedder). Where the time goes: the seconds spent in each Cypher statement (the driver's
`run` timed per statement text).

    .venv/bin/python scripts/bench/graph_write.py --neo4j-uri bolt://127.0.0.1:17687 -n 5000

The memories are scripts/bench/search.py's (fact templates over a skewed entity pool, one relation each; a few
thousand distinct entities at 5,000 memories). Each configuration writes its own fresh user, in chunks of
--chunk; the first chunk creates most entities (the gate then runs its candidate queries for each), later
chunks mostly mention entities that exist.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from neo4j._async.work.transaction import AsyncTransactionBase  # noqa: E402

from scripts.bench.common import embedder_rate  # noqa: E402
from scripts.bench.search import make_memories  # noqa: E402
from service.identity import NameRules, NameVectors, ResolutionGate  # noqa: E402
from service.stores.neo4j import Neo4jGraphStore  # noqa: E402
from tests.conftest import local_embedder  # noqa: E402

STATEMENTS: dict[str, list[float]] = {}


def time_statements() -> None:
    """Wrap the driver's transaction `run` so each statement's time is summed by its first words (until its first
    answer: records streamed later are not counted), and its commit."""
    original = AsyncTransactionBase.run

    async def timed(self: Any, query: Any, parameters: Any = None, **kw: Any) -> Any:
        started = time.perf_counter()
        result = await original(self, query, parameters, **kw)
        key = " ".join(str(query).split())[:70]
        slot = STATEMENTS.setdefault(key, [0, 0.0])
        slot[0] += 1
        slot[1] += time.perf_counter() - started
        return result

    AsyncTransactionBase.run = timed  # type: ignore[method-assign]
    commit = AsyncTransactionBase._commit

    async def timed_commit(self: Any) -> Any:  # index updates (full text, the name vectors) happen at commit
        started = time.perf_counter()
        try:
            return await commit(self)
        finally:
            slot = STATEMENTS.setdefault("COMMIT (the transaction's index updates and log write)", [0, 0.0])
            slot[0] += 1
            slot[1] += time.perf_counter() - started

    AsyncTransactionBase._commit = timed_commit  # type: ignore[method-assign]


async def load(store: Neo4jGraphStore, n: int, chunk: int) -> tuple[list[float], float, list[str], str]:
    user = f"gw-{uuid.uuid4().hex[:10]}"
    memories, links, _ = make_memories(user, n, 1)
    rates: list[float] = []
    started = time.perf_counter()
    for i in range(0, n, chunk):
        t = time.perf_counter()
        await store.upsert_memories(memories[i : i + chunk], links[i : i + chunk])
        rates.append(len(memories[i : i + chunk]) / (time.perf_counter() - t))
        if time.perf_counter() - started > 900:
            raise SystemExit("graph_write bench: over 900 s, stopped")
    total = n / (time.perf_counter() - started)
    return rates, total, [m.id for m in memories], user


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--neo4j-uri", default="bolt://127.0.0.1:7687")
    ap.add_argument("--neo4j-database", default="memory")
    ap.add_argument("-n", type=int, default=5000)
    ap.add_argument("--chunk", type=int, default=1000)
    args = ap.parse_args()
    time_statements()
    embedder = local_embedder()
    _, emb, _ = await embedder_rate("local", [f"Prefers tool {i} for data pipelines and web APIs" for i in range(512)])
    rows: list[tuple[str, list[float], float, dict[str, list[float]]]] = []
    for label, resolver in (("no gate", NameRules()), ("gate", NameVectors(embedder, ResolutionGate()))):
        store = Neo4jGraphStore(args.neo4j_uri, "neo4j", None, args.neo4j_database, 60, resolver)
        try:
            await store.ensure_schema()
            STATEMENTS.clear()
            rates, total, ids, user = await load(store, args.n, args.chunk)
            rows.append((label, rates, total, {k: list(v) for k, v in STATEMENTS.items()}))
            await store.remove_memories(ids, "2026-01-01T00:00:00+00:00", user_id=user, erase=True)
        finally:
            await store.close()
    print(f"\ngraph writes, {args.n} memories in chunks of {args.chunk}; embedder all-MiniLM-L6-v2 {emb:.0f} texts/s\n")
    print("| configuration | first chunk /s | later chunks /s (mean) | all /s | all / embedder |")
    print("|---|---:|---:|---:|---:|")
    for label, rates, total, _ in rows:
        later = sum(rates[1:]) / len(rates[1:]) if len(rates) > 1 else rates[0]
        print(f"| {label} | {rates[0]:.0f} | {later:.0f} | {total:.0f} | {total / emb:.2f}x |")
    for label, _, _, stmts in rows:
        print(f"\nwhere the time goes ({label}): seconds per statement, all chunks")
        for key, (count, seconds) in sorted(stmts.items(), key=lambda kv: -kv[1][1])[:10]:
            print(f"  {seconds:7.2f} s  {int(count):5d} x  {key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
