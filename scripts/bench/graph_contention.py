"""Graph writes of one hot user under concurrency: three ways of writing, side by side in one run.

    .venv/bin/python scripts/bench/graph_contention.py --neo4j-uri bolt://127.0.0.1:7687 [-n 1000] [-c 32]

Every mode writes `-n` memories of one fresh user from `-c` concurrent writers, each memory mentioning
2-4 entities of a small shared pool (ten people, five places, eight tools) and stating one relation,
the shape of the soak benchmark's hot user (the shape that once deadlocked):

- `per-job`:   one transaction per memory, rows in the order the memory names them (the old write path);
- `sorted`:    one transaction per memory, rows sorted by id (one global lock order);
- `coalesced`: through `service.ledger.graph_writer.GraphWriter`: the writes waiting for the user's writer
  go in one transaction, one transaction at a time per user (the write path now).

It prints per mode: seconds, memories/s, transactions, deadlock retries the driver made, and writes
that failed after the driver's retries; then the ratios against `per-job`. It uses the product's own
`Neo4jGraphStore` and removes its users' nodes at the end. Exit status 0 when no write failed in the
`coalesced` mode.

`--smoke` (no other argument needed): -n 30 -c 8 on TEST_NEO4J_URI / TEST_NEO4J_DATABASE when set; checks each mode
printed a rate > 0 and every write was stored, then prints `smoke: OK` (else `smoke: FAIL`, exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench.procs import smoke_verdict  # noqa: E402
from service.core.domain import Memory, Scope, content_hash  # noqa: E402
from service.identity.rules import NameRules  # noqa: E402
from service.ledger.graph_writer import GraphWriter  # noqa: E402
from service.stores.graph import EntityRef, MemoryLinks, RelationRef  # noqa: E402
from service.stores.neo4j import memories as neo4j_store  # noqa: E402
from service.stores.neo4j import rows as neo4j_rows  # noqa: E402
from service.stores.neo4j.store import Neo4jGraphStore  # noqa: E402

PEOPLE = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy")
PLACES = ("Lisbon", "Berlin", "Oslo", "Kyoto", "Quito")
TOOLS = ("PostgreSQL", "Redis", "Rust", "Python", "Docker", "Neo4j", "Kafka", "Vim")


@dataclass
class Result:
    mode: str
    seconds: float
    transactions: int
    deadlocks: int
    transient: int
    failed: int
    n: int

    @property
    def rate(self) -> float:
        return self.n / self.seconds if self.seconds else 0.0


def make_writes(user: str, n: int, seed: int) -> list[tuple[Memory, MemoryLinks]]:
    rng = random.Random(seed)
    stamp = "2026-01-01T00:00:00+00:00"
    out = []
    for i in range(n):
        people = rng.sample(PEOPLE, 2)
        place, tool = rng.choice(PLACES), rng.choice(TOOLS)
        text = f"{people[0]} met {people[1]} in {place} to talk about {tool} (#{i})"
        memory = Memory(id=str(uuid.uuid4()), user_id=user, content=text, category="personal_fact",
                        scope=Scope.GLOBAL, hash=content_hash(text), created_at=stamp, updated_at=stamp)
        entities = [EntityRef(people[0], "person"), EntityRef(people[1], "person"), EntityRef(place, "place"),
                    EntityRef(tool, "tool"), EntityRef("user", "person")]
        rng.shuffle(entities)
        links = MemoryLinks(memory.id, entities, [RelationRef(people[0], "knows", people[1], text)])
        out.append((memory, links))
    return out


async def run_mode(graph: Neo4jGraphStore, mode: str, writes: list[tuple[Memory, MemoryLinks]],
                   concurrency: int) -> Result:
    user = writes[0][0].user_id
    writer = GraphWriter(graph.memories)
    sem = asyncio.Semaphore(concurrency)
    failed = 0
    before = (graph.deadlock_retries, graph.transient_retries)

    async def one(memory: Memory, links: MemoryLinks) -> None:
        nonlocal failed
        async with sem:
            try:
                if mode == "coalesced":
                    await writer.upsert(user, [memory], [links])
                else:
                    await graph.memories.upsert_memories([memory], [links])
            except Exception as exc:  # counted and shown: a failed write is the figure this bench is about
                failed += 1
                print(f"  {mode}: write failed: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(m, link) for m, link in writes))
    seconds = time.perf_counter() - t0
    transactions = writer.batches if mode == "coalesced" else len(writes)
    return Result(mode, seconds, transactions, graph.deadlock_retries - before[0],
                  graph.transient_retries - before[1], failed, len(writes))


def unsorted_rows(original: Any) -> Any:
    """`link_rows` as it was before this change: rows in the order the memories name them."""
    def rows(*args: Any, **kwargs: Any) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = original(*args, **kwargs)
        rng = random.Random(len(out["entities"]))
        for key in ("entities", "mentions", "relations"):
            rng.shuffle(out[key])
        return out
    return rows


async def cleanup(graph: Neo4jGraphStore, users: list[str]) -> None:
    async def run(tx: Any) -> None:
        await (await tx.run("MATCH (n) WHERE n.user_id IN $users DETACH DELETE n", users=users)).consume()

    for _ in range(100):  # bounded: users' nodes in batches are small here
        try:
            await graph.executor.write(run)
            return
        except Exception as exc:  # retry a transient failure of the cleanup a few times
            print(f"cleanup retry: {exc}", file=sys.stderr)
            await asyncio.sleep(0.5)


async def stored(graph: Neo4jGraphStore, users: list[str]) -> dict[str, int]:
    """Each user's (:Memory) nodes (--smoke: every write stored)."""
    rows = await graph.executor.read_one(
        "MATCH (m:Memory) WHERE m.user_id IN $users RETURN m.user_id, count(m)", users=users)
    return {str(u): int(c) for u, c in rows}


async def main(args: argparse.Namespace) -> int:
    graph = Neo4jGraphStore(args.neo4j_uri, "neo4j", args.neo4j_password, args.database, 10.0, NameRules())
    await graph.ensure_schema()
    tag = uuid.uuid4().hex[:8]
    results: list[Result] = []
    users: list[str] = []
    counts: dict[str, int] = {}
    original = neo4j_rows.link_rows
    try:
        for mode in ("per-job", "sorted", "coalesced"):
            user = f"bench-contention-{tag}-{mode}"
            users.append(user)
            writes = make_writes(user, args.n, args.seed)
            neo4j_store.link_rows = unsorted_rows(original) if mode == "per-job" else original  # type: ignore[attr-defined]
            results.append(await run_mode(graph, mode, writes, args.concurrency))
            neo4j_store.link_rows = original  # type: ignore[attr-defined]
        if args.smoke:
            counts = await stored(graph, users)
    finally:
        neo4j_store.link_rows = original  # type: ignore[attr-defined]
        await cleanup(graph, users)
        await graph.close()
    base = results[0]
    print(f"\ngraph writes of one hot user: n={args.n}, concurrency={args.concurrency}")
    print(f"{'mode':<10} {'seconds':>8} {'mem/s':>8} {'tx':>6} {'deadlock retries':>17} {'transient':>10} "
          f"{'failed':>7} {'x per-job':>10}")
    for r in results:
        print(f"{r.mode:<10} {r.seconds:>8.2f} {r.rate:>8.1f} {r.transactions:>6} {r.deadlocks:>17} "
              f"{r.transient:>10} {r.failed:>7} {r.rate / base.rate if base.rate else 0:>10.2f}")
    if args.smoke:
        print(f"stored memories per mode: {[counts.get(u, 0) for u in users]} of {args.n} each")
        ok = (len(results) == 3 and all(r.rate > 0 and r.failed == 0 for r in results)
              and all(counts.get(u, 0) == args.n for u in users))
        return smoke_verdict(ok)
    return 0 if results[-1].failed == 0 else 1


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--neo4j-uri", default="bolt://127.0.0.1:7687")
    p.add_argument("--neo4j-password", default=None)
    p.add_argument("--database", default="memory")
    p.add_argument("-n", type=int, default=1000)
    p.add_argument("-c", "--concurrency", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="a short check on the test stack: -n 30 -c 8")
    args = p.parse_args()
    if args.smoke:
        args.neo4j_uri = os.environ.get("TEST_NEO4J_URI", args.neo4j_uri)
        args.database = os.environ.get("TEST_NEO4J_DATABASE", args.database)
        args.n, args.concurrency = 30, 8
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
