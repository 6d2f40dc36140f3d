"""Dedup sweep benchmark: synthetic users of 10k, 50k and 100k memories with planted duplicates.

Builds the data through the store layer (Qdrant Edge in a temp dir + Neo4j), then per user:

1. the seed's way: one thresholded vector search per memory (on the first --seed-sample memories,
   extrapolated to the user's size and labelled so; run in full when the user has at most
   --seed-full-up-to memories);
2. a dry run under tracemalloc (peak traced memory; it must plan exactly what the real run removes);
3. the real run, timed, with RSS sampled every 5 ms and, from other coroutines on the same event
   loop, asyncio.sleep(0.01) lag and a search latency for another user every 50 ms.

It checks the removals against the plant (precision and recall must both be 1.0; exit status 1
otherwise) and that each removed memory's unique graph edge was expired.

    TEST_REDIS_URL=redis://127.0.0.1:16379/0 TEST_NEO4J_URI=bolt://127.0.0.1:27687 \\
    .venv/bin/python scripts/bench/dedup.py [--sizes 10000,50000,100000] [--seed-sample 2000]

The plant per user: ~6% of memories in exact-duplicate groups (2-3 copies of one content), ~6% in
near-duplicate groups ("paraphrases": independent perturbations of one centre at cosine 0.98-0.995,
pairwise >= 0.955) and chains (a~b~c at 0.96, a~c 0.84), ~3% decoy pairs at cosine 0.93-0.949, and
copies of some duplicates in a second project that must stay. Creation times are shuffled so the
newest is not the last written. Only planted memories get (:Memory) nodes and edges in Neo4j
(--graph all writes every memory; none writes nothing).

`--smoke` (no other argument needed): one user of SMOKE_SIZE memories and a probe user of SMOKE_PROBE, 1 s idle
probe, on TEST_REDIS_URL / TEST_NEO4J_URI / TEST_NEO4J_DATABASE; checks the row printed (precision and recall 1.0, every
graph edge expired, a rate > 0), removes what it wrote (edge shard, graph nodes, Redis keys), then prints `smoke: OK`
(else `smoke: FAIL`, exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import structlog

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `service` importable without an editable install

from scripts.bench.common import pct  # noqa: E402
from scripts.bench.procs import smoke_verdict  # noqa: E402
from service.core.domain import Memory, Scope  # noqa: E402
from service.core.redis_client import connect_redis  # noqa: E402
from service.core.settings import Settings  # noqa: E402
from service.identity.rules import NameRules  # noqa: E402
from service.maintenance.algorithm import NearDuplicateFinder  # noqa: E402
from service.maintenance.sweep import DedupSweep  # noqa: E402
from service.schemas.maintenance import DedupRunReport  # noqa: E402
from service.stores.graph import MemoryLinks, RelationRef  # noqa: E402
from service.stores.neo4j.store import Neo4jGraphStore  # noqa: E402
from service.stores.qdrant_edge import EdgeVectorStore  # noqa: E402
from service.stores.vector import MemoryFilter, RankRequest  # noqa: E402

DIM = 384
PROJECT, OTHER_PROJECT = "proj-a", "proj-b"
MAX_SECONDS = 6 * 3600  # every loop below is bounded by count, and the whole run by this
# a near group's members are told apart by a word, not a number: the sweep never pairs texts that state different
# numbers (service/maintenance/algorithm.py), so "near 1" and "near 2" would never be near-duplicates
MEMBER = ("alpha", "bravo", "charlie", "delta")
SMOKE_SIZE, SMOKE_PROBE = 400, 200  # --smoke: the swept user's memories and the probe user's




# =================================================================================================
# the plant
# =================================================================================================


@dataclass
class Plant:
    user: str
    memories: list[Memory] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    expected: set[str] = field(default_factory=set)  # ids a correct sweep removes
    planted: set[str] = field(default_factory=set)  # ids in any group or decoy (graph nodes)
    links: dict[str, MemoryLinks] = field(default_factory=dict)
    decoys: int = 0
    exact_groups: int = 0
    near_groups: int = 0
    chains: int = 0
    cross_project: int = 0


class Builder:
    def __init__(self, user: str, n: int, rng: np.random.Generator) -> None:
        self.p = Plant(user)
        self.n = n
        self.rng = rng
        start = datetime(2025, 1, 1, tzinfo=UTC)
        minutes = rng.permutation(n * 2)[:n]  # shuffled, distinct creation times
        self._times = [(start + timedelta(minutes=int(m))).isoformat() for m in minutes]
        self._k = 0

    def unit(self) -> np.ndarray:
        v = self.rng.standard_normal(DIM)
        return v / np.linalg.norm(v)

    def around(self, centre: np.ndarray, cos: float) -> np.ndarray:
        """A unit vector at exactly `cos` from `centre`, in a random direction (a "paraphrase")."""
        n = self.rng.standard_normal(DIM)
        n -= (n @ centre) * centre
        n /= np.linalg.norm(n)
        return cos * centre + float(np.sqrt(1 - cos * cos)) * n

    def add(self, vec: np.ndarray, content: str, *, project: str | None = None, group: str | None = None) -> Memory:
        created = self._times[self._k]
        self._k += 1
        m = Memory(
            id=str(uuid.uuid4()), user_id=self.p.user, content=content,
            category="convention" if project else "preference",
            scope=Scope.PROJECT if project else Scope.GLOBAL, project_id=project,
            hash=uuid.uuid5(uuid.NAMESPACE_OID, content).hex,  # stands for md5(normalised content)
            created_at=created, updated_at=created,
        )
        self.p.memories.append(m)
        self.p.vectors.append(vec)
        if group is not None:
            self.p.planted.add(m.id)
            # every member supports the group's shared fact and one fact of its own
            self.p.links[m.id] = MemoryLinks(m.id, [], [
                RelationRef("user", "states", f"group {group}", f"user states group {group}"),
                RelationRef("user", "says", f"detail {m.id}", f"user says detail {m.id}"),
            ])
        return m

    def group(self, members: list[Memory]) -> None:
        newest = max(members, key=lambda m: (m.created_at, m.id))
        self.p.expected |= {m.id for m in members if m.id != newest.id}

    @property
    def room(self) -> int:
        return self.n - self._k

    def build(self) -> Plant:
        rng, n = self.rng, self.n
        tag = self.p.user
        while self.room > 0 and len(self.p.expected) < n * 0.06 * 0.55:  # exact groups
            size = min(int(rng.integers(2, 4)), self.room)
            if size < 2:
                break
            project = PROJECT if rng.random() < 0.2 else None
            vec, g = self.unit(), uuid.uuid4().hex[:8]
            content = f"{tag} exact {g}"
            self.group([self.add(vec, content, project=project, group=g) for _ in range(size)])
            self.p.exact_groups += 1
            if rng.random() < 0.1 and self.room:  # the same content in another project: stays
                self.add(vec, content, project=OTHER_PROJECT, group=g + "x")
                self.p.cross_project += 1
        exact_done = len(self.p.expected)
        while self.room > 0 and len(self.p.expected) - exact_done < n * 0.06 * 0.6:  # near groups and chains
            project = PROJECT if rng.random() < 0.2 else None
            g = uuid.uuid4().hex[:8]
            if rng.random() < 0.25 and self.room >= 3:  # chain a~b~c, a and c below the threshold
                u, w = self.unit(), self.unit()
                w -= (w @ u) * u
                w /= np.linalg.norm(w)
                a = float(np.arccos(0.96))
                members = [self.add(np.cos(k * a) * u + np.sin(k * a) * w, f"{tag} chain {g} {MEMBER[k]}",
                                   project=project, group=g) for k in range(3)]
                self.p.chains += 1
            else:
                size = min(int(rng.integers(2, 5)), self.room)
                if size < 2:
                    break
                centre = self.unit()
                members = [self.add(self.around(centre, float(rng.uniform(0.98, 0.995))),
                                    f"{tag} near {g} {MEMBER[k]}", project=project, group=g) for k in range(size)]
            self.group(members)
            self.p.near_groups += 1
        while self.room >= 2 and self.p.decoys < n * 0.015:  # decoy pairs just below the threshold
            project = PROJECT if rng.random() < 0.2 else None
            g = uuid.uuid4().hex[:8]
            x = self.unit()
            self.add(x, f"{tag} decoy {g} a", project=project, group=g)
            self.add(self.around(x, float(rng.uniform(0.93, 0.949))), f"{tag} decoy {g} b", project=project, group=g)
            self.p.decoys += 1
        for i in range(self.room):  # everything else: unique
            self.add(self.unit(), f"{tag} unique {i}", project=PROJECT if rng.random() < 0.2 else None)
        return self.p


# =================================================================================================
# probes
# =================================================================================================


class RssSampler:
    """Peak resident memory of this process, sampled every 5 ms in a thread (psutil releases the GIL)."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self.base = self.peak = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for _ in range(int(MAX_SECONDS / 0.005)):
            if self._stop.wait(0.005):
                return
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def loop_lag(stop: asyncio.Event, out: list[float]) -> None:
    for _ in range(int(MAX_SECONDS / 0.01)):
        if stop.is_set():
            return
        t = time.perf_counter()
        await asyncio.sleep(0.01)
        out.append((time.perf_counter() - t - 0.01) * 1000)


async def search_latency(
    stop: asyncio.Event, out: list[float], store: EdgeVectorStore, user: str, rng: np.random.Generator
) -> None:
    for _ in range(int(MAX_SECONDS / 0.05)):
        if stop.is_set():
            return
        v = rng.standard_normal(DIM)
        t = time.perf_counter()
        await store.rank([RankRequest(MemoryFilter(user), 10, vector=(v / np.linalg.norm(v)).tolist())])
        out.append((time.perf_counter() - t) * 1000)
        await asyncio.sleep(0.05)


async def probed(
    start: Callable[[], Awaitable[DedupRunReport]], store: EdgeVectorStore, probe_user: str
) -> tuple[DedupRunReport, list[float], list[float]]:
    lag: list[float] = []
    search: list[float] = []
    stop = asyncio.Event()
    rng = np.random.default_rng(99)
    tasks = [asyncio.create_task(loop_lag(stop, lag)),
             asyncio.create_task(search_latency(stop, search, store, probe_user, rng))]
    try:
        result = await start()
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    return result, lag, search


# =================================================================================================
# runs
# =================================================================================================


async def seed_way(
    store: EdgeVectorStore, plant: Plant, threshold: float, sample: int, batch: int
) -> tuple[float, int, int]:
    """the v1 API's semantic phase: for each memory, one vector search for neighbours above the threshold
    (the older of each pair would be deleted). Returns (seconds, memories searched, pairs found)."""
    t0 = time.perf_counter()
    done = pairs = 0
    for flt in (MemoryFilter(plant.user, scope=Scope.GLOBAL), MemoryFilter(plant.user, scope=Scope.PROJECT)):
        cursor: str | None = None
        for _ in range(len(plant.memories) // batch + 10):
            page, cursor = await store.scroll_vectors(flt, batch, cursor)
            for rec in page:
                if done >= sample:
                    return time.perf_counter() - t0, done, pairs
                scoped = MemoryFilter(plant.user, scope=rec.memory.scope, project_id=rec.memory.project_id)
                [hits] = await store.rank([RankRequest(scoped, 10, vector=rec.vector)])
                pairs += sum(1 for mid, score in hits if mid != rec.memory.id and score >= threshold)
                done += 1
            if cursor is None:
                break
    return time.perf_counter() - t0, done, pairs


@dataclass
class Row:
    n: int
    seconds: float
    scanned: int
    exact_removed: int
    near_removed: int
    precision: float
    recall: float
    graph_expired: int
    graph_expected: int
    peak_rss_mb: float
    rss_growth_mb: float
    peak_traced_mb: float
    matrix_s: float
    seed_s: float
    seed_label: str
    lag: list[float]
    search: list[float]
    dry_matches: bool
    errors: int


async def bench_user(
    args: argparse.Namespace, settings: Settings, store: EdgeVectorStore, graph: Neo4jGraphStore | None,
    redis: object, plant: Plant, probe_user: str,
) -> Row:
    n = len(plant.memories)
    memories = graph.memories if graph else _NoGraph()
    sweep = DedupSweep(settings.redis, settings.dedup, settings.calibration.dedup, store, memories, redis)  # type: ignore[arg-type]

    # the seed's way, before anything is removed
    sample = n if n <= args.seed_full_up_to else min(args.seed_sample, n)
    seed_s, searched, _ = await seed_way(store, plant, args.threshold, sample, args.batch_size)
    if searched >= n:
        seed_total, label = seed_s, "measured"
    else:
        seed_total, label = seed_s * n / max(1, searched), f"extrapolated from {searched}"
    print(f"  seed way: {searched} searches in {seed_s:.1f} s ({searched / seed_s:.0f}/s) -> "
          f"{seed_total:.1f} s for {n} ({label})", flush=True)

    # the near-phase matrix work alone, on the same vectors (how much of the sweep is CPU)
    vecs = np.asarray(plant.vectors, dtype=np.float32)
    t = time.perf_counter()
    NearDuplicateFinder(vecs, args.threshold).run()
    matrix_s = time.perf_counter() - t
    del vecs
    gc.collect()

    # dry run under tracemalloc
    tracemalloc.start()
    dry = await sweep.run(uuid.uuid4().hex, trigger="manual", user_id=plant.user, dry_run=True, budget_s=MAX_SECONDS)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dry_ids = {i for u in dry.users for ph in (u.exact, u.near) for i in ph.removed_ids}
    gc.collect()

    # the real run, probed
    with RssSampler() as rss:
        t0 = time.perf_counter()
        report, lag, search = await probed(
            lambda: sweep.run(uuid.uuid4().hex, trigger="manual", user_id=plant.user, budget_s=MAX_SECONDS),
            store, probe_user,
        )
        seconds = time.perf_counter() - t0
    [u] = report.users
    assert report.status == "completed", report.detail

    still = set()
    ids = [m.id for m in plant.memories]
    for start in range(0, n, 1000):
        still |= {m.id for m in await store.get(ids[start : start + 1000])}
    removed = set(ids) - still
    true_pos = len(removed & plant.expected)
    precision = true_pos / len(removed) if removed else 1.0
    recall = true_pos / len(plant.expected) if plant.expected else 1.0
    reported = u.exact.removed + u.near.removed
    if reported != len(removed):
        print(f"  !! report says {reported} removed, the store lost {len(removed)}")
    return Row(
        n=n, seconds=seconds, scanned=u.exact.scanned, exact_removed=u.exact.removed, near_removed=u.near.removed,
        precision=precision, recall=recall,
        graph_expired=u.exact.graph_edges_expired + u.near.graph_edges_expired,
        graph_expected=len(plant.expected) if graph is not None else 0,
        peak_rss_mb=rss.peak / 2**20, rss_growth_mb=(rss.peak - rss.base) / 2**20,
        peak_traced_mb=traced_peak / 2**20, matrix_s=matrix_s,
        seed_s=seed_total, seed_label=label, lag=lag, search=search,
        dry_matches=(dry_ids == removed) or (dry.users[0].exact.truncated or dry.users[0].near.truncated),
        errors=report.totals.errors,
    )


class _NoGraph:
    """--graph none: a graph store that accepts removals and does nothing (vector side only)."""

    name = "none"

    async def remove_memories(
        self, memory_ids: list[str], now: str, duplicate_of: dict[str, str] | None = None
    ) -> list[str]:
        return []


async def write(store: EdgeVectorStore, graph: Neo4jGraphStore | None, plant: Plant, mode: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    for start in range(0, len(plant.memories), 2000):
        chunk = plant.memories[start : start + 2000]
        await store.upsert(chunk, [v.tolist() for v in plant.vectors[start : start + 2000]])
    t1 = time.perf_counter()
    if graph is not None and mode != "none":
        nodes = [m for m in plant.memories if mode == "all" or m.id in plant.planted]
        for start in range(0, len(nodes), 1000):
            chunk = nodes[start : start + 1000]
            await graph.memories.upsert_memories(chunk, [plant.links[m.id] for m in chunk if m.id in plant.links])
    return t1 - t0, time.perf_counter() - t1


async def smoke_cleanup(graph: Neo4jGraphStore | None, redis: Any, users: list[str], prefix: str) -> None:
    """--smoke: remove the bench users' graph nodes and the sweep's Redis keys (a plain run leaves them)."""
    if graph is not None:
        async def run(tx: Any) -> int:
            rec = await (await tx.run("MATCH (n) WHERE n.user_id IN $users WITH n LIMIT 5000 DETACH DELETE n "
                                      "RETURN count(*) AS n", users=users)).single()
            return int(rec["n"]) if rec else 0

        for _ in range(100):  # bounded: a smoke run writes a few hundred nodes
            if await graph.executor.write(run) == 0:
                break
    keys = [k async for k in redis.scan_iter(match=f"{prefix}:*", count=1000)][:10_000]
    if keys:
        await redis.delete(*keys)


async def main(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    tag = uuid.uuid4().hex[:6]
    queue = f"bench:dedup:{tag}"
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=args.redis_url, neo4j_uri=args.neo4j_uri, arq_queue_name=queue,
        dedup_batch_size=args.batch_size, dedup_similarity_threshold=args.threshold, log_level="WARNING",
    )
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    tmp = Path(tempfile.mkdtemp(prefix="bench-dedup-"))
    store = EdgeVectorStore(tmp, "bench_dedup")
    await store.ensure_collection(DIM, "bench-synthetic")
    graph = None
    if args.graph != "none":
        graph = Neo4jGraphStore(args.neo4j_uri, "neo4j", None, args.neo4j_database, 10.0, NameRules())
        await graph.ensure_schema()
    redis = await connect_redis(settings.redis)
    rng = np.random.default_rng(args.seed)
    print(f"dedup bench: sizes {sizes}, threshold {args.threshold}, page {args.batch_size}, dim {DIM}, "
          f"graph={args.graph}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}, edge shard at {tmp}",
          flush=True)

    rows: list[Row] = []
    users = [f"bench-{tag}-probe"]
    try:
        probe = Builder(users[0], SMOKE_PROBE if args.smoke else 1000, rng).build()
        await write(store, None, probe, "none")
        plants = []
        for n in sizes:
            t = time.perf_counter()
            users.append(f"bench-{tag}-{n}")
            plant = Builder(users[-1], n, rng).build()
            vec_s, graph_s = await write(store, graph, plant, args.graph)
            plants.append(plant)
            print(f"user {plant.user}: {n} memories ({plant.exact_groups} exact groups, {plant.near_groups} near "
                  f"groups incl. {plant.chains} chains, {plant.decoys} decoy pairs, {plant.cross_project} "
                  f"cross-project copies; {len(plant.expected)} to remove) built+written in "
                  f"{time.perf_counter() - t:.1f} s (vectors {vec_s:.1f} s, graph {graph_s:.1f} s)", flush=True)
        if args.optimize:
            t = time.perf_counter()
            await store.optimize()
            print(f"optimize(): {time.perf_counter() - t:.1f} s", flush=True)
        idle_lag: list[float] = []
        idle_search: list[float] = []
        stop = asyncio.Event()
        probes = [asyncio.create_task(loop_lag(stop, idle_lag)),
                  asyncio.create_task(search_latency(stop, idle_search, store, probe.user, rng))]
        await asyncio.sleep(1 if args.smoke else 3)
        stop.set()
        await asyncio.gather(*probes)
        print(f"idle: loop lag p50 {pct(idle_lag, 50):.2f} ms p99 {pct(idle_lag, 99):.2f} ms; "
              f"search p50 {pct(idle_search, 50):.1f} ms p99 {pct(idle_search, 99):.1f} ms", flush=True)
        for plant in plants:
            print(f"sweeping {plant.user} ({len(plant.memories)} memories)", flush=True)
            rows.append(await bench_user(args, settings, store, graph, redis, plant, probe.user))
    finally:
        if args.smoke:
            await smoke_cleanup(graph, redis, users, queue)
        await redis.aclose()
        await store.close()
        if graph is not None:
            await graph.close()
        if args.smoke:
            shutil.rmtree(tmp, ignore_errors=True)

    print()
    print("| memories | sweep s | memories/s | exact removed | near removed | precision | recall | graph edges "
          "expired/expected | peak traced MB (dry run) | process RSS peak MB (+growth) | matrix-only s | "
          "seed way s | ratio | loop lag p50/p99/max ms | search p50/p99 ms |")
    print("|" + "---|" * 15)
    ok = True
    for r in rows:
        print(f"| {r.n} | {r.seconds:.2f} | {r.scanned / r.seconds:,.0f} | {r.exact_removed} | {r.near_removed} | "
              f"{r.precision:.4f} | {r.recall:.4f} | {r.graph_expired}/{r.graph_expected} | {r.peak_traced_mb:.0f} | "
              f"{r.peak_rss_mb:.0f} (+{r.rss_growth_mb:.0f}) | {r.matrix_s:.2f} | {r.seed_s:.1f} ({r.seed_label}) | "
              f"{r.seed_s / r.seconds:.1f}x | {pct(r.lag, 50):.2f}/{pct(r.lag, 99):.2f}/{max(r.lag, default=0):.1f} | "
              f"{pct(r.search, 50):.1f}/{pct(r.search, 99):.1f} |")
        ok &= r.precision == 1.0 and r.recall == 1.0 and r.dry_matches and r.errors == 0
        if r.graph_expected:
            ok &= r.graph_expired == r.graph_expected
    print()
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cpus)")
    print("peak traced = tracemalloc peak of a dry run (Python objects and numpy buffers the sweep allocates);")
    print("process RSS = the whole bench process (stores, plant data) during the real run, growth over its start;")
    print("matrix-only s = NearDuplicateFinder alone on the same vectors (pure numpy, no store);")
    print("seed way = one store.search per memory (limit 10, score >= threshold kept), as the v1 design did;")
    print("loop lag = how late asyncio.sleep(0.01) wakes up on the sweep's event loop; search = a vector")
    print("search for another user every 50 ms on that loop, while the sweep runs.")
    if not all(r.dry_matches for r in rows):
        print("!! a dry run did not report exactly what the real run removed")
    print("OK" if ok else "FAILED: see the table")
    if args.smoke:
        ok &= (len(rows) == 1 and rows[0].scanned == SMOKE_SIZE and rows[0].seconds > 0 and rows[0].near_removed > 0
               and rows[0].exact_removed > 0 and bool(rows[0].lag) and bool(rows[0].search))
        return smoke_verdict(ok)
    return 0 if ok else 1


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,50000,100000")
    ap.add_argument("--seed-sample", type=int, default=2000, help="searches of the seed's way per user")
    ap.add_argument("--seed-full-up-to", type=int, default=10_000, help="run the seed's way in full up to this size")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--batch-size", type=int, default=100, help="DEDUP_BATCH_SIZE (page size)")
    ap.add_argument("--graph", choices=("planted", "all", "none"), default="planted")
    ap.add_argument("--optimize", action="store_true", help="build HNSW before the seed's way (Edge optimize())")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--redis-url", default=os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--neo4j-uri", default=os.environ.get("TEST_NEO4J_URI", "bolt://127.0.0.1:7687"))
    ap.add_argument("--neo4j-database", default=os.environ.get("TEST_NEO4J_DATABASE", "memory"))
    ap.add_argument("--smoke", action="store_true",
                    help=f"a short check on the test stack: --sizes {SMOKE_SIZE}, a {SMOKE_PROBE}-memory probe user")
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.seed_sample, args.graph = str(SMOKE_SIZE), SMOKE_SIZE, "planted"
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
