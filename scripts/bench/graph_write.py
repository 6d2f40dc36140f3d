"""Bulk graph writes through `Neo4jGraphStore.upsert_memories`.

Two modes:

- `--mode growth` (default): one user, the search bench's memories (fact templates over its skewed
  entity pool, one relation each), the resolution gate on, written in chunks of --chunk. Prints the chunk rate
  against the size already loaded (buckets of --bucket memories: min-max, the median chunk rate, which a shared
  machine's bursts move less than the mean, and the load average), the slowest chunk beside the write deadline,
  and the latency of single-memory writes (p50/p99 of --singles writes, one memory each) when the user's graph
  reaches each of --sizes. The question: does a write cost the same at any size of the user's graph?
  Also the store's transactions (the chunks `upsert_memories` cuts a call into): the first ones' sizes and
  times, and the slowest transaction of each bucket beside the target (a tenth of the write deadline).

      .venv/bin/python scripts/bench/graph_write.py --neo4j-uri bolt://127.0.0.1:17687 -n 100000 --sizes 10000,100000

- `--mode gate`: memories per second without and with the entity resolution gate, beside the local
  embedder's rate measured in the same run (target: graph writes >= 5x the embedder).

      .venv/bin/python scripts/bench/graph_write.py --mode gate --neo4j-uri bolt://127.0.0.1:17687 -n 5000

Both print where the time goes: the seconds spent in each Cypher statement (the driver's `run` timed per
statement text) and in the commits.

`--smoke` (no other argument needed): growth with -n 200, --chunk 50, --sizes 100, --singles 5, then gate with
-n 100, on TEST_NEO4J_URI / TEST_NEO4J_DATABASE when set; checks every write was stored (its users' nodes
removed after), rates > 0 and the tables printed, then prints `smoke: OK` (else `smoke: FAIL`, exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from neo4j._async.work.transaction import AsyncTransactionBase  # noqa: E402

import service.stores.neo4j.executor as store_module  # noqa: E402  (where the store calls write_chunked)
from scripts.bench.common import embedder_rate, local_embedder  # noqa: E402
from scripts.bench.procs import smoke_verdict  # noqa: E402
from scripts.bench.search import make_memories  # noqa: E402
from service.identity.gate import ResolutionGate  # noqa: E402
from service.identity.rules import NameRules, NameVectors  # noqa: E402
from service.stores.neo4j.store import Neo4jGraphStore  # noqa: E402

STATEMENTS: dict[str, list[float]] = {}
TRANSACTIONS: list[tuple[int, float]] = []  # (items, seconds) of each write of a chunk the store's sizer timed


def time_transactions() -> None:
    """Time each chunk the store writes (`write_chunked`'s `write(chunk)`: the names' embedding and the
    transaction, what the sizer measures), splits included; works with any version of the store's chunking."""
    original = store_module.write_chunked  # type: ignore[attr-defined]

    async def timed(items: Any, sizer: Any, write: Any, *args: Any, **kw: Any) -> Any:
        async def timed_write(chunk: list[Any]) -> Any:
            started = time.perf_counter()
            try:
                return await write(chunk)
            finally:
                TRANSACTIONS.append((len(chunk), time.perf_counter() - started))

        return await original(items, sizer, timed_write, *args, **kw)

    store_module.write_chunked = timed  # type: ignore[attr-defined]


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
            return await commit(self)  # type: ignore[no-untyped-call]
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
        await store.memories.upsert_memories(memories[i : i + chunk], links[i : i + chunk])
        rates.append(len(memories[i : i + chunk]) / (time.perf_counter() - t))
        if time.perf_counter() - started > 900:
            raise SystemExit("graph_write bench: over 900 s, stopped")
    total = n / (time.perf_counter() - started)
    return rates, total, [m.id for m in memories], user


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def span(b: int, bucket: int) -> str:
    """The sizes bucket `b` covers: "10k-20k", or "100-200" when --bucket is not a multiple of 1000 (--smoke)."""
    lo, hi = b * bucket, (b + 1) * bucket
    return f"{lo // 1000}k-{hi // 1000}k" if bucket % 1000 == 0 else f"{lo}-{hi}"


async def growth(store: Neo4jGraphStore, n: int, chunk: int, sizes: list[int], singles: int, bucket: int,
                 limit: float) -> tuple[str, int, list[float], dict[int, list[float]]]:
    """One user grown to n memories; chunk rates by size already loaded, single-write latency at `sizes`.
    Returns (the user, memories written, the chunk rates, the single writes' latencies by size)."""
    user = f"gw-{uuid.uuid4().hex[:10]}"
    memories, links, _ = make_memories(user, n + singles * len(sizes), 1)
    extra = list(zip(memories[n:], links[n:], strict=True))  # the single writes: later memories of the same pool
    chunks: list[tuple[int, int, float]] = []  # (loaded before, memories, seconds)
    load1s: dict[int, float] = {}  # the machine's 1-minute load average after each chunk (a shared machine)
    latency: dict[int, list[float]] = {}
    latency_load: dict[int, float] = {}
    pending = sorted(s for s in sizes if s <= n)
    loaded = 0
    txs: list[tuple[int, int, float]] = []  # (loaded before the call, items, seconds) of the store's transactions
    started = time.perf_counter()
    for i in range(0, n, chunk):
        t = time.perf_counter()
        TRANSACTIONS.clear()
        await store.memories.upsert_memories(memories[i : i + chunk], links[i : i + chunk])
        seconds = time.perf_counter() - t
        txs += [(loaded, k, sec) for k, sec in TRANSACTIONS]
        chunks.append((loaded, len(memories[i : i + chunk]), seconds))
        load1s[loaded] = os.getloadavg()[0]
        loaded += len(memories[i : i + chunk])
        if len(chunks) % 10 == 0:
            print(f"  {loaded:>8} loaded, last chunk {chunks[-1][1] / seconds:7.0f}/s, "
                  f"{time.perf_counter() - started:6.0f} s", flush=True)
        while pending and loaded >= pending[0]:
            size = pending.pop(0)
            lat: list[float] = []
            for m, link in extra[:singles]:
                t = time.perf_counter()
                await store.memories.upsert_memories([m], [link])
                lat.append(time.perf_counter() - t)
            extra = extra[singles:]
            latency[size] = lat
            latency_load[size] = os.getloadavg()[0]
            loaded += len(lat)
        if time.perf_counter() - started > limit:
            print(f"graph_write bench: over {limit:.0f} s, stopped at {loaded} memories")
            break
    total = time.perf_counter() - started
    deadline = store.executor.timeout * 6
    print(f"\ngraph writes, one user, {loaded} memories (search bench pool, resolution gate on) in chunks of {chunk},"
          f" {total:.0f} s; write deadline {deadline:.0f} s, a tenth of it {deadline / 10:.1f} s\n")
    print("| memories already in the user's graph | chunks | chunk rate /s min-max | median | mean | slowest chunk s |"
          " | load1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    by_bucket: dict[int, list[tuple[int, int, float]]] = {}
    for row in chunks:
        by_bucket.setdefault(row[0] // bucket, []).append(row)
    means: dict[int, float] = {}
    medians: dict[int, float] = {}
    for b, rows in sorted(by_bucket.items()):
        rates = [k / sec for _, k, sec in rows]
        means[b] = sum(k for _, k, _ in rows) / sum(sec for _, _, sec in rows)
        medians[b] = pct(rates, 0.5)
        loads = [load1s[r[0]] for r in rows if r[0] in load1s]
        print(f"| {span(b, bucket)} | {len(rows)} | {min(rates):.0f}-{max(rates):.0f}"
              f" | {medians[b]:.0f} | {means[b]:.0f} | {max(sec for _, _, sec in rows):.2f} | "
              f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f} |")
    first = min((b for b in means if b * bucket >= 20_000), default=min(means))
    last = max(means)
    # the median chunk rate of a bucket damps a shared machine's bursts (one slow chunk moves a mean, not a median)
    print(f"\nrate at {span(last, bucket)} / rate at {span(first, bucket)}: median of chunk rates "
          f"{medians[last] / medians[first]:.2f}, mean {means[last] / means[first]:.2f}")
    print(f"slowest chunk {max(sec for _, _, sec in chunks):.2f} s; the store's chunks: {store.chunk_stats}")
    target = store.executor.timeout * 0.6
    print("\nthe store's first transactions (memories, s): "
          + ", ".join(f"{k} {sec:.2f}" for _, k, sec in txs[:12]))
    print(f"\n| memories already in the user's graph | transactions | memories per transaction min-median-max "
          f"| slowest transaction s (memories) | over {target:.1f} s |")
    print("|---|---:|---:|---:|---:|")
    by_tx: dict[int, list[tuple[int, int, float]]] = {}
    for row in txs:
        by_tx.setdefault(row[0] // bucket, []).append(row)
    for b, rows in sorted(by_tx.items()):
        sizes_ = [k for _, k, _ in rows]
        worst = max(rows, key=lambda r: r[2])
        print(f"| {span(b, bucket)} | {len(rows)} | {min(sizes_)}-"
              f"{pct([float(k) for k in sizes_], 0.5):.0f}-{max(sizes_)} | {worst[2]:.2f} ({worst[1]}) | "
              f"{sum(1 for r in rows if r[2] > target)} |")
    if latency:
        print("\n| user's graph size | single writes | p50 ms | p99 ms | max ms | load1 |")
        print("|---:|---:|---:|---:|---:|---:|")
        for size, lat in sorted(latency.items()):
            print(f"| {size} | {len(lat)} | {pct(lat, 0.5) * 1000:.1f} | {pct(lat, 0.99) * 1000:.1f} | "
                  f"{max(lat) * 1000:.1f} | {latency_load[size]:.1f} |")
    return user, loaded, [k / sec for _, k, sec in chunks], latency


async def stored(store: Neo4jGraphStore, user: str) -> int:
    """The user's (:Memory) nodes in the graph (--smoke: every write stored)."""
    rows = await store.executor.read_one("MATCH (m:Memory {user_id: $u}) RETURN count(m)", u=user)
    return int(rows[0][0]) if rows else 0


async def drop_user(store: Neo4jGraphStore, user: str) -> None:
    """Remove the user's nodes (--smoke only: a growth run normally keeps its user), in bounded batches."""
    async def run(tx: Any) -> int:
        rec = await (await tx.run("MATCH (n) WHERE n.user_id = $u WITH n LIMIT 5000 DETACH DELETE n "
                                  "RETURN count(*) AS n", u=user)).single()
        return int(rec["n"]) if rec else 0

    for _ in range(100):  # bounded: a smoke user has a few hundred nodes
        if await store.executor.write(run) == 0:
            return


async def run_growth(args: argparse.Namespace, embedder: Any) -> bool:
    """--mode growth; True when its figures are sane (what --smoke asserts)."""
    store = Neo4jGraphStore(args.neo4j_uri, "neo4j", None, args.neo4j_database, args.timeout,
                            NameVectors(embedder, ResolutionGate()))
    try:
        await store.ensure_schema()
        STATEMENTS.clear()
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        user, loaded, rates, latency = await growth(store, args.n, args.chunk, sizes, args.singles, args.bucket,
                                                    args.max_seconds)
        ok = True
        if args.smoke:
            in_graph = await stored(store, user)
            want = args.n + args.singles * len([s for s in sizes if s <= args.n])
            print(f"\nsmoke: growth wrote {loaded} of {want} memories, {in_graph} stored in the graph")
            ok = (loaded == want == in_graph and bool(rates) and min(rates) > 0
                  and all(len(latency.get(s, [])) == args.singles for s in sizes))
            await drop_user(store, user)
    finally:
        await store.close()
    print("\nwhere the time goes: seconds per statement, all writes")
    for key, (count, seconds) in sorted(STATEMENTS.items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"  {seconds:8.2f} s  {int(count):6d} x  {key}")
    return ok and bool(STATEMENTS)


async def run_gate(args: argparse.Namespace, embedder: Any) -> bool:
    """--mode gate; True when its figures are sane (what --smoke asserts)."""
    texts = [f"Prefers tool {i} for data pipelines and web APIs" for i in range(64 if args.smoke else 512)]
    name, emb, _ = await embedder_rate("local", texts)
    rows: list[tuple[str, list[float], float, dict[str, list[float]]]] = []
    for label, resolver in (("no gate", NameRules()), ("gate", NameVectors(embedder, ResolutionGate()))):
        store = Neo4jGraphStore(args.neo4j_uri, "neo4j", None, args.neo4j_database, 60, resolver)
        try:
            await store.ensure_schema()
            STATEMENTS.clear()
            rates, total, ids, user = await load(store, args.n, args.chunk)
            rows.append((label, rates, total, {k: list(v) for k, v in STATEMENTS.items()}))
            await store.memories.remove_memories(ids, "2026-01-01T00:00:00+00:00", user_id=user, erase=True)
            if args.smoke:
                await drop_user(store, user)  # the tombstones too
        finally:
            await store.close()
    print(f"\ngraph writes, {args.n} memories in chunks of {args.chunk}; embedder {name} {emb:.0f} texts/s\n")
    print("| configuration | first chunk /s | later chunks /s (mean) | all /s | all / embedder |")
    print("|---|---:|---:|---:|---:|")
    for label, rates, total, _ in rows:
        later = sum(rates[1:]) / len(rates[1:]) if len(rates) > 1 else rates[0]
        print(f"| {label} | {rates[0]:.0f} | {later:.0f} | {total:.0f} | {total / emb:.2f}x |")
    for label, _, _, stmts in rows:
        print(f"\nwhere the time goes ({label}): seconds per statement, all chunks")
        for key, (count, seconds) in sorted(stmts.items(), key=lambda kv: -kv[1][1])[:10]:
            print(f"  {seconds:7.2f} s  {int(count):5d} x  {key}")
    return emb > 0 and len(rows) == 2 and all(total > 0 and min(rates) > 0 for _, rates, total, _ in rows)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--neo4j-uri", default="bolt://127.0.0.1:7687")
    ap.add_argument("--neo4j-database", default="memory")
    ap.add_argument("--mode", choices=("growth", "gate"), default="growth")
    ap.add_argument("-n", type=int, default=5000)
    ap.add_argument("--chunk", type=int, default=1000)
    ap.add_argument("--sizes", default="10000", help="growth: comma-separated sizes to time single writes at")
    ap.add_argument("--singles", type=int, default=200, help="growth: single writes timed at each size")
    ap.add_argument("--bucket", type=int, default=10_000, help="growth: memories per row of the rate table")
    ap.add_argument("--timeout", type=float, default=5.0, help="the store's timeout (GRAPH_TIMEOUT_SECONDS)")
    ap.add_argument("--max-seconds", type=float, default=7200)
    ap.add_argument("--smoke", action="store_true",
                    help="a short check on the test stack: growth -n 200 --sizes 100 --singles 5, then gate -n 100")
    args = ap.parse_args()
    time_statements()
    time_transactions()
    embedder = local_embedder()
    if not args.smoke:
        await (run_growth if args.mode == "growth" else run_gate)(args, embedder)
        return 0
    args.neo4j_uri = os.environ.get("TEST_NEO4J_URI", args.neo4j_uri)
    args.neo4j_database = os.environ.get("TEST_NEO4J_DATABASE", args.neo4j_database)
    args.n, args.chunk, args.sizes, args.singles, args.bucket, args.max_seconds = 200, 50, "100", 5, 100, 60.0
    grown = await run_growth(args, embedder)
    args.n = 100
    gated = await run_gate(args, embedder)
    ok = grown and gated
    return smoke_verdict(ok)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
