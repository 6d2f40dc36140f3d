"""Search benchmark: `POST /v1/search` latency at 10k and 100k memories per user, vector-only vs fused.

    .venv/bin/python scripts/bench/search.py --redis-url redis://127.0.0.1:6379/0 \
        [--sizes 10000,100000] [--clients 1,8] [--requests 300] [--vectors local|random] \
        [--neo4j-uri bolt://127.0.0.1:7687]   # default: a private Neo4j in the work dir

What it does, in order (every loop is bounded in count and in time):

1. Load. For each size N, one user `bench-<N>-<run>` gets N synthetic memories (80% global, 20% in
   5 projects; 11 fact templates over an entity pool of max(300, N/20) names — technologies,
   services, people, places — drawn with a skew so a few entities are hot, as in real use). Each
   memory has explicit graph links (1-3 entities, one relation) and a place in a conversation write (every 20
   consecutive memories one write, a message each: what neighbouring turns need). They are written through the
   product's own store layer, built by `service.deps.build_deps`: `EdgeVectorStore.upsert` (Qdrant
   Edge at `<workdir>/data/qdrant`) and `Neo4jGraphStore.upsert_memories` (UNWIND MERGE), in
   chunks of `--chunk` (1000). Nothing goes through the API or the queue.
   Vectors: `--vectors local` (default) embeds every memory with the local model, as a write
   would (200-450 texts/s on 2 cores: 4-9 min for 110k); `--vectors random` uses clustered random unit
   vectors (512 random centroids, cosine ~0.7 to their centroid) for speed. Queries are always
   embedded by the service's embedder, so search cost is the same either way on plain segments;
   only which memories come back differs.
2. In-process figures, through the same objects (the API process is not running yet: Qdrant
   Edge lets one process open a shard):
   - vector-only: `embedder.embed([q])` + `vectors.rank(...)` + `vectors.get(...)`, the dense retriever alone
     with a fresh query embedding every time;
   - graph-only: `graph.propose_memories(...)`, the graph retriever;
   - merged, embedding cached: `MemoryService.search(SearchRequest)`, the fused search, after every query
     was asked once (the per-process query-embedding cache holds them: an agent repeating a query);
   - merged, embedding cold: the same with the cache emptied before each search (a query never asked);
   - with `--breakdown`: `search [dense|lexical|graph] only, cached` (`retrievers: [<one>]`).
   The API cannot be asked for vector-only results (there is no switch, and an unreachable Neo4j
   makes the service refuse to start or wait for GRAPH_TIMEOUT_SECONDS), so the ratio
   merged/vector-only is measured in-process (both embed every query).
3. HTTP figures: `python -m service` on a free port of 127.0.0.1 (embedded profile, its worker
   as configured (a child process by default), DATA_DIR/QDRANT_PATH = the loaded data, private ARQ queue), then
   `POST /v1/search` (merged: it is the only kind the API serves) from this process: once with every
   query sent before the cell (cached), once with the service started with QUERY_CACHE_SIZE=0 (cold).
   The load generator shares the 2 cores with the service, so HTTP figures include that contention.
4. Print one table: size, clients, path, requests, p50/p95/p99 ms, requests/s, degraded answers,
   load1, then the ratios merged/vector-only (in-process) and HTTP merged / in-process vector-only.

Each cell sends `--requests` queries (cycled from 60 per user: entity names, words of the fact
texts, and some that match nothing in the graph) from `--clients` concurrent clients after
`--warmup` unmeasured ones (all 60 for the cached cells), stopping early after `--cell-seconds`.
`limit` is 10 (the API default) unless `--limit`. `--optimize` adds a last phase that builds Qdrant
Edge's HNSW index as the service's optimize cron does (a child process on a copy, then a swap),
measures searches during the build, and the in-process paths and (unless `--no-http`) the HTTP cells again
after it. Neo4j's heap (used / committed / max, over JMX) is printed after the load and at the end, with the
private Neo4j's store size on disk.

Before/after in one run: `--keep --workdir DIR --tag T` keeps the loaded data; later runs with
`--reuse --workdir DIR --tag T --neo4j-uri ...` measure it again without loading. `--compare-ref REF`
(with `--reuse`) exports `service/` and `worker/` of commit REF (`git archive`) and runs `--rounds`
rounds, each measuring REF's code ("before") then the working tree's or `--after-ref`'s ("after") in
child processes of this script on the same data, and prints both side by side, pooled over the rounds.
`--no-http` skips the HTTP cells (step 3, and after `--optimize`).

With `--neo4j-uri` the data goes to that database and the bench users' nodes are removed at the
end (`--keep` keeps them and the work dir). Redis is needed by the service only (start-up and its
in-process worker); the script uses a private queue name. Exit status: 0 when every search
answered, 1 otherwise.

`--smoke` (no other argument needed): --sizes 200 --clients 1 --requests 12 --vectors random --embedder hash on the
test stack (TEST_REDIS_URL, TEST_NEO4J_URI, TEST_NEO4J_DATABASE), the in-process cells and the cold HTTP one; checks
every cell answered every search, removes what it wrote (graph nodes, work dir, the queue's Redis keys), then prints
`smoke: OK` (else `smoke: FAIL`, exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import structlog

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `service` importable without an editable install

from scripts.bench.common import NEO4J_JMX_MEMORY, pct  # noqa: E402
from scripts.bench.procs import free_port, smoke_verdict, stop, wait_port  # noqa: E402

PROJECTS = tuple(f"proj-{i}" for i in range(5))
GLOBAL_CATEGORIES = ("preference", "technical_skill", "decision", "workflow", "personal_fact", "interaction")
PROJECT_CATEGORIES = ("tech_stack", "dependency", "architecture", "convention", "decision")

TECH = (
    ("Python", "language"), ("Rust", "language"), ("TypeScript", "language"), ("Go", "language"),
    ("Kotlin", "language"), ("Java", "language"), ("Elixir", "language"), ("Ruby", "language"),
    ("PostgreSQL", "database"), ("Redis", "database"), ("SQLite", "database"), ("MongoDB", "database"),
    ("ClickHouse", "database"), ("Neo4j", "database"), ("Qdrant", "database"), ("Kafka", "service"),
    ("RabbitMQ", "service"), ("Docker", "tool"), ("Kubernetes", "tool"), ("Terraform", "tool"),
    ("pytest", "tool"), ("ruff", "tool"), ("mypy", "tool"), ("FastAPI", "framework"), ("Django", "framework"),
    ("React", "framework"), ("Vue", "framework"), ("Next.js", "framework"), ("Flask", "framework"),
    ("GitHub Actions", "tool"), ("Grafana", "tool"), ("Prometheus", "tool"), ("Sentry", "service"),
    ("AWS", "service"), ("GCP", "service"), ("Fly.io", "service"), ("Vercel", "service"), ("Nginx", "tool"),
    ("vim", "tool"), ("VS Code", "tool"), ("tmux", "tool"), ("Poetry", "tool"), ("uv", "tool"),
)
ADJ = ("amber", "silent", "rapid", "crimson", "lunar", "brisk", "copper", "hollow", "velvet", "arctic",
       "golden", "misty", "quiet", "scarlet", "solar", "tidal", "urban", "vivid", "wild", "young",
       "bright", "cobalt", "dusty", "early", "frozen", "gentle", "hidden", "ivory", "jade", "keen")
NOUN = ("falcon", "harbor", "meadow", "comet", "river", "lantern", "summit", "orchid", "pebble", "canyon",
        "willow", "beacon", "glacier", "thicket", "ember", "prairie", "quarry", "reef", "spruce", "tundra",
        "atlas", "bramble", "cedar", "delta", "fjord", "grove", "heron", "island", "juniper", "kestrel")
FIRST = ("Ana", "Bilal", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jia", "Kofi", "Lena",
         "Marta", "Nikhil", "Olga", "Pedro", "Quinn", "Rosa", "Sami", "Tariq", "Uma", "Viktor", "Wen", "Yara")
LAST = ("Silva", "Okafor", "Novak", "Tanaka", "Haddad", "Kowalski", "Moreau", "Ivanova", "Mensah", "Lindqvist",
        "Rahman", "Costa", "Weber", "Kim", "Nguyen", "Ortiz")
PLACES = ("Lisbon", "Porto", "Berlin", "Nairobi", "Osaka", "Toronto", "Lyon", "Krakow", "Austin", "Dublin",
          "Seoul", "Bogota", "Tallinn", "Cape Town", "Melbourne", "Oslo")
PURPOSES = ("data pipelines", "web APIs", "code review", "side projects", "shell scripts", "CI jobs",
            "prototyping", "load testing", "billing reports", "search ranking", "feature flags", "log shipping",
            "schema migrations", "nightly backups", "mobile builds", "on-call dashboards", "ETL jobs",
            "rate limiting", "image resizing", "email delivery", "auth tokens", "caching sessions",
            "background jobs", "release notes", "local development", "integration tests", "metrics export",
            "PDF rendering", "geocoding", "audit logs", "invoicing", "chat notifications")
WHEN = ("", " since last spring", " after the outage in March", " for about two years", " on weekdays",
        " since the rewrite", " when pairing", " at the new job", " for the Q3 launch", " in most repos")
REASONS = ("", " because it is faster", " since the team knows it", " to keep costs down",
           " after a long comparison", " because the docs are good", " for its stability")

# (predicate, global template, project template); {o} object entity, {o2} second entity, {p} project
FACTS: tuple[tuple[str, str, str], ...] = (
    ("uses", "I use {o} for {purpose}{when}", "{p} uses {o} for {purpose}{reason}"),
    ("prefers", "I prefer {o} over {o2} for {purpose}{reason}", "In {p} we prefer {o} to {o2} for {purpose}"),
    ("knows", "I know {o} well from {purpose}{when}", "The {p} team knows {o} well from {purpose}"),
    ("depends_on", "My {purpose} setup depends on {o}{when}", "{p} depends on {o} for {purpose}{reason}"),
    ("decided", "I decided to adopt {o} for {purpose}{reason}", "We decided on {o} for {purpose} in {p}{reason}"),
    ("works_on", "Currently working on {purpose} with {o}{when}", "{p} is working on {purpose} in {o}"),
    ("deploys_to", "I deploy my {purpose} to {o}{when}", "{p} deploys {purpose} to {o}{reason}"),
    ("tests_with", "I test {purpose} with {o}{when}", "{p} tests {purpose} with {o}"),
    ("works_with", "Paired with {person} on {purpose}{when}", "{person} owns {purpose} in {p}"),
    ("dislikes", "I dislike using {o} for {purpose}{reason}", "{p} avoids {o} for {purpose}{reason}"),
    ("visited", "Met the {o} team in {place} to discuss {purpose}", "{p} has an office in {place} for {purpose}"),
)
QUERY_TEMPLATES = (
    "what do I use {o} for",
    "{o}",
    "{o} {purpose}",
    "which tool do I prefer for {purpose}",
    "how does {p} handle {purpose}",
    "who works on {purpose}",
    "{person}",
    "decisions about {purpose}",
    "where do we deploy {purpose}",
    "zebra crossing umbrella lullaby",  # matches nothing in the graph, little in the vectors
)
QUERIES_PER_USER = 60




# --------------------------------------------------------------------------------------------
# synthetic data
# --------------------------------------------------------------------------------------------


@dataclass
class Pool:
    entities: list[tuple[str, str]]  # (name, type)
    people: list[str]

    def pick(self, rng: random.Random) -> tuple[str, str]:
        # skewed: index ~ N * u^2, so the first few entities are hot (~sqrt(1/N) of picks each)
        return self.entities[int(len(self.entities) * rng.random() ** 2)]


def make_pool(size: int, rng: random.Random) -> Pool:
    n = max(300, size // 20)
    synthetic: list[tuple[str, str]] = []
    kinds = ("service", "project", "library", "team")
    for i in range(n):
        a, b = ADJ[i % len(ADJ)], NOUN[(i // len(ADJ)) % len(NOUN)]
        suffix = "" if i < len(ADJ) * len(NOUN) else f"-{i // (len(ADJ) * len(NOUN))}"
        synthetic.append((f"{a}-{b}{suffix}", kinds[i % len(kinds)]))
    entities = list(TECH) + synthetic
    rng.shuffle(entities)
    entities = entities[:n]
    people = [f"{f} {last}" for f in FIRST for last in LAST]
    rng.shuffle(people)
    return Pool(entities, people[: max(40, n // 10)])


WRITE_MESSAGES = 20  # synthetic memories per conversation write (their positions: make_memories)


def make_memories(user_id: str, size: int, seed: int) -> tuple[list[Any], list[Any], Pool]:
    """N memories with explicit graph links; deterministic for (user_id, size, seed)."""
    from service.core.domain import ID_NAMESPACE, Memory, Scope, content_hash
    from service.stores.graph import EntityRef, MemoryLinks, RelationRef

    rng = random.Random(seed * 1_000_003 + size)
    pool = make_pool(size, rng)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    memories: list[Memory] = []
    links: list[MemoryLinks] = []
    for i in range(size):
        project = PROJECTS[rng.randrange(len(PROJECTS))] if rng.random() < 0.2 else None
        predicate, g_tpl, p_tpl = FACTS[rng.randrange(len(FACTS))]
        (o, o_type), (o2, o2_type) = pool.pick(rng), pool.pick(rng)
        person = pool.people[int(len(pool.people) * rng.random() ** 2)]
        place = PLACES[rng.randrange(len(PLACES))]
        text = (p_tpl if project else g_tpl).format(
            o=o, o2=o2, p=project, person=person, place=place, purpose=PURPOSES[rng.randrange(len(PURPOSES))],
            when=WHEN[rng.randrange(len(WHEN))], reason=REASONS[rng.randrange(len(REASONS))],
        )
        content = text[0].upper() + text[1:]
        subject = project or "user"
        if predicate == "works_with":
            target, entities = person, [EntityRef(person, "person")]
        elif predicate == "visited":
            target, entities = place, [EntityRef(o, o_type), EntityRef(place, "place")]
        else:
            target, entities = o, [EntityRef(o, o_type)] + ([EntityRef(o2, o2_type)] if "{o2}" in g_tpl else [])
        if project:
            entities.append(EntityRef(project, "project"))
        created = (start + timedelta(minutes=7 * i)).isoformat()
        mid = str(uuid.uuid5(ID_NAMESPACE, f"bench-search:{user_id}:{i}"))
        categories = PROJECT_CATEGORIES if project else GLOBAL_CATEGORIES
        memories.append(Memory(
            id=mid, user_id=user_id, content=content, category=categories[rng.randrange(len(categories))],
            scope=Scope.PROJECT if project else Scope.GLOBAL, project_id=project, hash=content_hash(content),
            metadata={"bench": "search"}, created_at=created, updated_at=created, task_id=None,
            # as if every WRITE_MESSAGES consecutive memories came from one conversation write, a message each (the
            # collapse by source then has sources to compare)
            source_write=f"bench-write:{user_id}:{i // WRITE_MESSAGES}", source_first=i % WRITE_MESSAGES,
            source_last=i % WRITE_MESSAGES,
        ))
        links.append(MemoryLinks(memory_id=mid, entities=entities,
                                 relations=[RelationRef(subject, predicate, target, content)]))
    return memories, links, pool


def make_queries(pool: Pool, seed: int) -> list[tuple[str, str | None]]:
    """(query, project_id) pairs; half of them pass a project_id, as an agent inside a repo would."""
    rng = random.Random(seed)
    out: list[tuple[str, str | None]] = []
    for i in range(QUERIES_PER_USER):
        tpl = QUERY_TEMPLATES[i % len(QUERY_TEMPLATES)]
        project = PROJECTS[rng.randrange(len(PROJECTS))]
        q = tpl.format(o=pool.pick(rng)[0], purpose=PURPOSES[rng.randrange(len(PURPOSES))], p=project,
                       person=pool.people[rng.randrange(len(pool.people))])
        out.append((q, project if i % 2 else None))
    return out


class RandomVectors:
    """Clustered unit vectors: 512 random centroids, each point ~0.7 cosine to its centroid."""

    def __init__(self, dim: int, seed: int) -> None:
        import numpy as np

        self._np = np
        self._gen = np.random.default_rng(seed)
        centroids = self._gen.standard_normal((512, dim)).astype(np.float32)
        self._centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
        self._dim = dim

    def take(self, n: int) -> list[list[float]]:
        np = self._np
        which = self._gen.integers(0, len(self._centroids), n)
        points = self._centroids[which] + self._gen.standard_normal((n, self._dim)).astype(np.float32) / math.sqrt(
            self._dim)
        points /= np.linalg.norm(points, axis=1, keepdims=True)
        return [[float(x) for x in row] for row in points]


# --------------------------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------------------------



def start_neo4j(home: Path, heap: str, pagecache: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    log = (home.parent / "neo4j.log").open("wb")
    proc = subprocess.Popen(
        [str(ROOT / "scripts/neo4j/run.sh"), "--home", str(home), "--host", "127.0.0.1", "--port", str(port),
         "--database", "memory", "--heap", heap, "--pagecache", pagecache],
        stdout=log, stderr=subprocess.STDOUT,
    )
    wait_port(port, proc, 300, "neo4j")
    return proc, port


def code_root() -> Path:
    """The tree whose `service` package this process imports: ROOT, or a --compare-ref export of another commit."""
    import service

    return Path(service.__file__).resolve().parents[1]


def start_service(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """`python -m service` as a user runs it (embedded profile, its worker as configured), from the tree of the
    `service` package this process imports."""
    return subprocess.Popen(
        [sys.executable, "-m", "service"], cwd=code_root(), env=env, stdout=log_path.open("ab"),
        stderr=subprocess.STDOUT,
    )


def service_env(args: argparse.Namespace, data_dir: Path, queue: str, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "NEO4J_", "QDRANT_", "ARQ_"))}
    if os.environ.get("NEO4J_PASSWORD"):
        env["NEO4J_PASSWORD"] = os.environ["NEO4J_PASSWORD"]
    env.update({
        "HOST": "127.0.0.1", "PORT": str(port), "LOG_FORMAT": "json", "LOG_LEVEL": "WARNING",
        "REDIS_URL": args.redis_url, "NEO4J_URI": args.neo4j_uri, "NEO4J_DATABASE": args.neo4j_database,
        "DATA_DIR": str(data_dir), "QDRANT_PATH": str(data_dir / "qdrant"), "ARQ_QUEUE_NAME": queue,
        "EMBEDDER": args.embedder,
    })
    env.pop("GOOGLE_API_KEY", None)  # offline: no Gemini client in the measured process
    return env


# --------------------------------------------------------------------------------------------
# measurement
# --------------------------------------------------------------------------------------------


@dataclass
class Cell:
    size: int
    clients: int
    path: str
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    degraded: int = 0
    wall_s: float = 0.0
    load1: float = 0.0  # machine load average (1 min) when the cell ended: other work on the 2 cores


async def measure(
    cell: Cell, call: Callable[[str, str | None], Awaitable[bool]], queries: list[tuple[str, str | None]],
    requests: int, warmup: int, cap_s: float,
) -> Cell:
    """`requests` calls from `cell.clients` concurrent workers (after `warmup` unmeasured ones),
    stopping early after `cap_s`; `call` returns True when the answer was degraded."""
    for i in range(warmup):
        with contextlib.suppress(Exception):
            await call(*queries[i % len(queries)])
    counter = iter(range(requests))
    deadline = time.monotonic() + cap_s

    async def worker() -> None:
        for i in counter:  # shared iterator: `requests` calls in all, whichever worker takes them
            if time.monotonic() >= deadline:
                return
            q, project = queries[i % len(queries)]
            t0 = time.perf_counter()
            try:
                degraded = await call(q, project)
            except Exception as exc:
                cell.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                continue
            cell.latencies_ms.append((time.perf_counter() - t0) * 1000)
            cell.degraded += int(degraded)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(cell.clients)))
    cell.wall_s = time.perf_counter() - t0
    cell.load1 = os.getloadavg()[0]
    return cell


def reuse_queries(size: int, seed: int) -> list[tuple[str, str | None]]:
    """The queries `load` made for this size (same pool: `make_memories` draws it first from the same seed)."""
    pool = make_pool(size, random.Random(seed * 1_000_003 + size))
    return make_queries(pool, seed + size)


def chunks(items: list[Any], n: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), n):
        yield items[start : start + n]


def settings_for(args: argparse.Namespace, data_dir: Path, queue: str) -> Any:
    from service.core.settings import Settings

    return Settings(  # type: ignore[call-arg]
        _env_file=None, redis_url=args.redis_url, neo4j_uri=args.neo4j_uri, neo4j_database=args.neo4j_database,
        data_dir=data_dir, qdrant_path=data_dir / "qdrant", arq_queue_name=queue, embedder=args.embedder,
        google_api_key=None, log_level="WARNING", log_format="console",
    )


async def load(deps: Any, args: argparse.Namespace, users: dict[int, str]) -> dict[int, list[tuple[str, str | None]]]:
    """Write the synthetic memories through the store layer; returns each size's queries."""
    queries: dict[int, list[tuple[str, str | None]]] = {}
    for size, user in users.items():
        t0 = time.perf_counter()
        memories, links, pool = make_memories(user, size, args.seed)
        queries[size] = make_queries(pool, args.seed + size)
        t_gen = time.perf_counter() - t0
        # chunk by chunk (embed, then upsert) so 100k vectors are never all held at once
        t_emb = t_vec = 0.0
        rand = RandomVectors(deps.embedder.dim, args.seed + size) if args.vectors == "random" else None
        for i, m_part in enumerate(chunks(memories, args.chunk)):
            if i and i % 20 == 0:
                print(f"  {user}: vectors {i * args.chunk}/{size}", flush=True)
            t0 = time.perf_counter()
            if rand is not None:
                vectors = rand.take(len(m_part))
            else:
                vectors = await deps.embedder.embed([m.content for m in m_part])
            t1 = time.perf_counter()
            await deps.vectors.upsert(m_part, vectors)
            t_emb, t_vec = t_emb + (t1 - t0), t_vec + (time.perf_counter() - t1)
        t0 = t_last = time.perf_counter()
        for i, (m_part, l_part) in enumerate(zip(chunks(memories, args.chunk), chunks(links, args.chunk),
                                                 strict=True)):
            await deps.graph.memories.upsert_memories(m_part, l_part)
            if (i + 1) % 20 == 0:
                done, now = (i + 1) * args.chunk, time.perf_counter()
                # the overall rate, the last 20 chunks' rate, and the machine's load (a shared machine)
                print(f"  {user}: graph {done}/{size} ({done / (now - t0):.0f}/s; last {20 * args.chunk} "
                      f"{20 * args.chunk / (now - t_last):.0f}/s; {now - t0:.0f} s; load1 {os.getloadavg()[0]:.1f})",
                      flush=True)
                t_last = now
        t_graph = time.perf_counter() - t0
        print(
            f"loaded {user}: {size} memories  generate {t_gen:.1f}s  vectors[{args.vectors}] {t_emb:.1f}s "
            f"({size / max(t_emb, 1e-9):.0f}/s)  qdrant upsert {t_vec:.1f}s ({size / max(t_vec, 1e-9):.0f}/s)  "
            f"neo4j upsert_memories {t_graph:.1f}s ({size / max(t_graph, 1e-9):.0f}/s)",
            flush=True,
        )
    return queries


def search_part(deps: Any) -> Any:
    """The object whose `search` the service's route calls: `Deps.search` (a --compare-ref run may measure code
    from before it, where `Deps.service` held it)."""
    return getattr(deps, "search", None) or deps.service


async def measure_in_process(
    deps: Any, args: argparse.Namespace, users: dict[int, str], queries: dict[int, list[tuple[str, str | None]]],
    cells: list[Cell], suffix: str = "", graph_only_too: bool = True,
) -> None:
    from service.schemas.search import SearchRequest
    from service.stores.graph import groups_for
    from service.stores.vector import MemoryFilter, RankRequest

    for size, user in users.items():

        async def vector_only(q: str, project: str | None, user: str = user) -> bool:
            [vec] = await deps.embedder.embed([q])
            flt = MemoryFilter(user_id=user, project_id=project)
            [hits] = await deps.vectors.rank([RankRequest(flt, args.limit, vector=vec)])
            await deps.vectors.get([mid for mid, _ in hits])  # the payloads, as a search reads its results'
            return False

        async def graph_only(q: str, project: str | None, user: str = user) -> bool:
            await deps.graph.reads.propose_memories(user, groups_for(project), q, 50)  # the graph retriever
            return False

        async def merged(q: str, project: str | None, user: str = user) -> bool:
            resp = await search_part(deps).search(SearchRequest(query=q, project_id=project, limit=args.limit), user)
            return bool(resp.degraded)

        async def merged_cold(q: str, project: str | None, user: str = user) -> bool:
            # the query is embedded again, as a query never asked before (the cache is the Searcher's; a
            # --compare-ref run may measure code from before service/search/, where the service held it)
            part = search_part(deps)
            getattr(part, "searcher", part).query_vectors.clear()
            return await merged(q, project, user)

        def alone(retriever: str, user: str = user) -> Callable[[str, str | None], Awaitable[bool]]:
            async def one(q: str, project: str | None) -> bool:
                req = SearchRequest(query=q, project_id=project, limit=args.limit,
                                    retrievers=[retriever])  # type: ignore[list-item]
                return bool((await search_part(deps).search(req, user)).degraded)
            return one

        # (name, call, warm the query-embedding cache with every query first)
        paths: list[tuple[str, Callable[[str, str | None], Awaitable[bool]], bool]] = [
            ("vector-only", vector_only, False)]
        if graph_only_too:
            paths.append(("graph-only", graph_only, False))
        paths += [("merged, embedding cached", merged, True), ("merged, embedding cold", merged_cold, False)]
        if args.breakdown:
            paths += [(f"search [{r}] only, cached", alone(r), True) for r in ("dense", "lexical", "graph")]
        for clients in args.clients:
            for name, call, warm in paths:
                path = f"{name} (in-process{suffix})"
                warmup = max(args.warmup, len(queries[size])) if warm else args.warmup
                cell = await measure(Cell(size, clients, path), call, queries[size], args.requests, warmup,
                                     args.cell_seconds)
                cells.append(cell)
                print(f"  {size} x{clients} {path}: p50 {pct(cell.latencies_ms, 50):.1f} ms", flush=True)


async def optimized_phase(
    args: argparse.Namespace, settings: Any, users: dict[int, str], queries: dict[int, list[tuple[str, str | None]]],
    cells: list[Cell],
) -> None:
    """--optimize: build Qdrant Edge's HNSW index (the service never does), then measure again."""
    from service.deps import build_deps

    deps = await build_deps(settings)
    try:
        optimize = getattr(deps.vectors, "optimize", None)
        if optimize is None:
            print(f"vector store {deps.vectors.name} has no optimize(); skipped", flush=True)
            return
        from service.schemas.search import SearchRequest

        # The build runs in a child process on a copy of the shard; searches go on here meanwhile.
        size, user = next(iter(users.items()))
        build = asyncio.ensure_future(optimize())
        t0 = time.perf_counter()
        during = Cell(size, 1, "merged during the HNSW build (in-process)")
        for i in range(1_000_000):  # bounded by the build's end
            if build.done():
                break
            q, project = queries[size][i % len(queries[size])]
            s0 = time.perf_counter()
            await search_part(deps).search(SearchRequest(query=q, project_id=project, limit=args.limit), user)
            during.latencies_ms.append((time.perf_counter() - s0) * 1000)
        await build
        cells.append(during)
        print(f"qdrant edge optimize() in a child process: {time.perf_counter() - t0:.1f}s, "
              f"{getattr(deps.vectors, 'last_optimize', {})}; {len(during.latencies_ms)} searches meanwhile, "
              f"p50 {pct(during.latencies_ms, 50):.1f} / p99 {pct(during.latencies_ms, 99):.1f} / "
              f"max {max(during.latencies_ms, default=0):.1f} ms", flush=True)
        await measure_in_process(deps, args, users, queries, cells, suffix=", HNSW", graph_only_too=False)
    finally:
        await deps.close()


async def measure_http(
    args: argparse.Namespace, port: int, users: dict[int, str], queries: dict[int, list[tuple[str, str | None]]],
    cells: list[Cell], path: str = "merged (HTTP /v1/search)", warm: bool = False,
) -> None:
    """`warm`: every query is sent once before the cell, so the service's query-embedding cache holds it."""
    limits = httpx.Limits(max_connections=max(args.clients), max_keepalive_connections=max(args.clients))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30.0, limits=limits) as client:
        for size, user in users.items():

            async def call(q: str, project: str | None, user: str = user) -> bool:
                body: dict[str, Any] = {"query": q, "user_id": user, "limit": args.limit}
                if project:
                    body["project_id"] = project
                resp = await client.post("/v1/search", json=body)
                if resp.status_code != 200:
                    raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:200]}")
                return bool(resp.json().get("degraded"))

            for clients in args.clients:
                warmup = max(args.warmup, len(queries[size])) if warm else args.warmup
                cell = await measure(Cell(size, clients, path), call, queries[size], args.requests, warmup,
                                     args.cell_seconds)
                cells.append(cell)
                print(f"  {size} x{clients} HTTP: p50 {pct(cell.latencies_ms, 50):.1f} ms", flush=True)


async def http_phase(
    args: argparse.Namespace, data_dir: Path, queue: str, users: dict[int, str],
    queries: dict[int, list[tuple[str, str | None]]], cells: list[Cell], work: Path, suffix: str,
) -> None:
    """The HTTP cells, twice: as configured (the cache warmed with every query), and with QUERY_CACHE_SIZE=0 (every
    query embedded, as a query never asked before). `suffix` names the phase in the cells' paths (", HNSW").
    --smoke: the second only (one service start)."""
    runs: list[tuple[str, dict[str, str], bool]] = [
        (f"merged, cached (HTTP /v1/search{suffix})", {}, True),
        (f"merged, cold (HTTP /v1/search{suffix})", {"QUERY_CACHE_SIZE": "0"}, False)]
    for path, extra, warm in runs[1:] if args.smoke else runs:
        port = free_port()
        service = start_service({**service_env(args, data_dir, queue, port), **extra}, work / "service.log")
        try:
            t0 = time.perf_counter()
            health = await wait_healthy(port, service, 300)
            print(f"service on 127.0.0.1:{port} healthy in {time.perf_counter() - t0:.0f}s: {health.get('checks')}",
                  flush=True)
            await measure_http(args, port, users, queries, cells, path, warm)
        finally:
            await asyncio.to_thread(stop, service)  # releases the Qdrant Edge shard


def bench_driver(args: argparse.Namespace) -> Any:
    """An async driver to the bench's Neo4j (NEO4J_PASSWORD from the environment when auth is on)."""
    from neo4j import AsyncGraphDatabase

    password = os.environ.get("NEO4J_PASSWORD")
    return AsyncGraphDatabase.driver(args.neo4j_uri, auth=("neo4j", password) if password else None)


async def neo4j_figures(args: argparse.Namespace, home: Path | None) -> str:
    """Neo4j's heap (JMX: used / committed / max) and, for the private Neo4j, its store on disk."""
    driver = bench_driver(args)
    try:
        async with driver.session(database=args.neo4j_database) as session:
            rec = await (await session.run(NEO4J_JMX_MEMORY)).single()
    finally:
        await driver.close()
    heap = rec["heap"] if rec else {}
    mb = {k: heap.get(k, 0) / 2**20 for k in ("used", "committed", "max")}
    out = f"neo4j heap: used {mb['used']:.0f} MB, committed {mb['committed']:.0f} MB, max {mb['max']:.0f} MB"
    if home is not None:
        def size(sub: str) -> float:
            return sum(f.stat().st_size for f in (home / "data" / sub).rglob("*") if f.is_file()) / 2**20

        out += f"; store: databases {size('databases'):.0f} MB, transaction logs {size('transactions'):.0f} MB"
    return out


async def wait_healthy(port: int, proc: subprocess.Popen[bytes], limit_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    last = ""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"service exited with {proc.returncode} during start-up")
            with contextlib.suppress(httpx.HTTPError):
                resp = await client.get("/health")
                if resp.status_code == 200:
                    body: dict[str, Any] = resp.json()
                    return body
                last = resp.text[:300]
            await asyncio.sleep(0.5)
    raise RuntimeError(f"service not healthy within {limit_s:.0f}s: {last}")


async def cleanup_graph(args: argparse.Namespace, users: list[str]) -> None:
    """Remove the bench users' nodes from an external Neo4j (bounded batches)."""
    driver = bench_driver(args)
    try:
        async with driver.session(database=args.neo4j_database) as session:
            for user in users:
                for _ in range(1000):  # bounded: 1000 batches of 5000 nodes
                    rec = await (await session.run(
                        "MATCH (n) WHERE (n:Memory OR n:Entity) AND n.user_id = $u WITH n LIMIT 5000 "
                        "DETACH DELETE n RETURN count(*) AS n", u=user)).single()
                    if not rec or rec["n"] == 0:
                        break
    finally:
        await driver.close()


def print_table(cells: list[Cell], args: argparse.Namespace) -> None:
    header = (f"{'size':>7} {'clients':>7}  {'path':<46}{'n':>5}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
              f"{'req/s':>8}{'degraded':>9}{'errors':>7}{'load1':>7}")
    print("\n" + header + "\n" + "-" * len(header))
    for c in cells:
        rate = len(c.latencies_ms) / c.wall_s if c.wall_s > 0 else 0.0
        print(f"{c.size:>7} {c.clients:>7}  {c.path:<46}{len(c.latencies_ms):>5}{pct(c.latencies_ms, 50):>9.1f}"
              f"{pct(c.latencies_ms, 95):>9.1f}{pct(c.latencies_ms, 99):>9.1f}{rate:>8.1f}{c.degraded:>9}"
              f"{len(c.errors):>7}{c.load1:>7.1f}")
    print("\nratios (p50 / p95):")
    by = {(c.size, c.clients, c.path): c for c in cells}
    for size in args.sizes:
        for clients in args.clients:
            vec = by.get((size, clients, "vector-only (in-process)"))
            mer = by.get((size, clients, "merged, embedding cold (in-process)"))
            http = by.get((size, clients, "merged, cold (HTTP /v1/search)"))
            if not vec or not vec.latencies_ms:
                continue
            v50, v95 = pct(vec.latencies_ms, 50), pct(vec.latencies_ms, 95)
            parts = []
            if mer and mer.latencies_ms:
                parts.append(f"merged/vector-only in-process {pct(mer.latencies_ms, 50) / v50:.2f} / "
                             f"{pct(mer.latencies_ms, 95) / v95:.2f}")
            if http and http.latencies_ms:
                parts.append(f"HTTP merged / in-process vector-only {pct(http.latencies_ms, 50) / v50:.2f} / "
                             f"{pct(http.latencies_ms, 95) / v95:.2f}")
            hv = by.get((size, clients, "vector-only (in-process, HNSW)"))
            hm = by.get((size, clients, "merged, embedding cold (in-process, HNSW)"))
            if hv and hm and hv.latencies_ms and hm.latencies_ms:
                r50 = pct(hm.latencies_ms, 50) / pct(hv.latencies_ms, 50)
                r95 = pct(hm.latencies_ms, 95) / pct(hv.latencies_ms, 95)
                parts.append(f"after HNSW build: merged/vector-only {r50:.2f} / {r95:.2f}")
            print(f"  {size:>7} x{clients}: " + ";  ".join(parts))


def export_ref(ref: str, where: Path) -> Path:
    """`service/` and `worker/` of commit `ref` in `where/<sha>` (git archive): the code a --compare-ref run
    measures as "before", on the same data and in the same run as the working tree's."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref], check=True, capture_output=True,
                         text=True).stdout.strip()
    target = where / f"code-{sha}"
    if not (target / "service").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "service", "worker"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def compare(args: argparse.Namespace) -> int:
    """--compare-ref: `--rounds` rounds, each measuring the commit's code ("before") then the working tree's
    ("after") in child processes of this script on the same loaded data (--reuse; one process at a time holds
    the shard), so both see the same machine load; latencies are pooled per cell over the rounds."""
    work = Path(args.workdir)
    trees = {"before": export_ref(args.compare_ref, work),
             "after": export_ref(args.after_ref, work) if args.after_ref else ROOT}
    argv: list[str] = []
    rest = iter(sys.argv[1:])
    for a in rest:  # the same options, minus the driver's own
        if a in ("--compare-ref", "--rounds", "--after-ref"):
            next(rest, None)
        elif not a.startswith(("--compare-ref=", "--rounds=", "--after-ref=")):
            argv.append(a)
    pooled: dict[tuple[str, int, int, str], Cell] = {}
    code = 0
    for rnd in range(args.rounds):
        for label, tree in trees.items():
            out = work / f"cells-{label}-{rnd}.json"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT)])}
            print(f"round {rnd + 1}/{args.rounds}: {label} ({tree})", flush=True)
            rc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv, "--cells-json", str(out)],
                                env=env, cwd=ROOT).returncode
            code = code or rc
            for c in json.loads(out.read_text()):
                key = (label, c["size"], c["clients"], c["path"])
                cell = pooled.setdefault(key, Cell(c["size"], c["clients"], c["path"]))
                cell.latencies_ms += c["latencies_ms"]
                cell.errors += c["errors"]
                cell.degraded += c["degraded"]
                cell.wall_s += c["wall_s"]
                cell.load1 = max(cell.load1, c["load1"])
    header = (f"{'size':>7} {'clients':>7}  {'path':<46}{'n':>6}{'before p50':>11}{'p95':>8}{'p99':>8}"
              f"{'after p50':>11}{'p95':>8}{'p99':>8}{'load1 max':>10}")
    print(f"\nbefore = {args.compare_ref} ({trees['before'].name}), after = {args.after_ref or 'the working tree'} "
          f"({trees['after'].name}); "
          f"{args.rounds} rounds, pooled\n" + header + "\n" + "-" * len(header))
    for (label, size, clients, path), before in pooled.items():
        if label != "before":
            continue
        after = pooled.get(("after", size, clients, path))
        if after is None:
            continue
        was, now = before.latencies_ms, after.latencies_ms
        print(f"{size:>7} {clients:>7}  {path:<46}{len(now):>6}{pct(was, 50):>11.1f}{pct(was, 95):>8.1f}"
              f"{pct(was, 99):>8.1f}{pct(now, 50):>11.1f}{pct(now, 95):>8.1f}{pct(now, 99):>8.1f}"
              f"{max(before.load1, after.load1):>10.1f}")
    return code


async def main(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    logging.getLogger("neo4j").setLevel(logging.ERROR)  # schema notifications of a fresh database
    tag = args.tag or uuid.uuid4().hex[:8]
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-search-"))
    work.mkdir(parents=True, exist_ok=True)
    data_dir = work / "data"
    queue = f"bench-search:{tag}"
    users = {size: f"bench-{size}-{tag}" for size in args.sizes}
    cells: list[Cell] = []
    neo4j_proc: subprocess.Popen[bytes] | None = None
    print(f"work dir {work}  sizes={args.sizes}  clients={args.clients}  requests/cell={args.requests}  "
          f"vectors={args.vectors}  embedder={args.embedder}  limit={args.limit}", flush=True)
    try:
        if args.neo4j_uri is None:
            t0 = time.perf_counter()
            neo4j_proc, neo4j_port = await asyncio.to_thread(
                start_neo4j, work / "neo4j", args.neo4j_heap, args.neo4j_pagecache)
            args.neo4j_uri = f"bolt://127.0.0.1:{neo4j_port}"
            print(f"private neo4j {args.neo4j_uri} (heap {args.neo4j_heap}, page cache {args.neo4j_pagecache}) "
                  f"ready in {time.perf_counter() - t0:.0f}s", flush=True)
        from service.deps import build_deps

        settings = settings_for(args, data_dir, queue)
        deps = await build_deps(settings)
        try:
            if args.reuse:
                queries = {size: reuse_queries(size, args.seed) for size in users}
                print(f"reusing the memories loaded in {data_dir} for {list(users.values())}", flush=True)
            else:
                queries = await load(deps, args, users)
            await measure_in_process(deps, args, users, queries, cells)
        finally:
            await deps.close()

        neo4j_home = work / "neo4j" if neo4j_proc is not None else None
        print(await neo4j_figures(args, neo4j_home), flush=True)
        if not args.no_http:
            await http_phase(args, data_dir, queue, users, queries, cells, work, "")
        if args.optimize:
            await optimized_phase(args, settings, users, queries, cells)
            if not args.no_http:
                await http_phase(args, data_dir, queue, users, queries, cells, work, ", HNSW")
        print(await neo4j_figures(args, neo4j_home), flush=True)
    except BaseException:
        log_path = work / "service.log"
        if log_path.exists():
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
            print("last lines of the service log:\n" + "\n".join(line[:500] for line in tail), flush=True)
        raise
    finally:
        if neo4j_proc is not None:
            await asyncio.to_thread(stop, neo4j_proc)
        elif not args.keep and args.neo4j_uri:
            with contextlib.suppress(Exception):
                await cleanup_graph(args, list(users.values()))
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print_table(cells, args)
    if args.cells_json:
        await asyncio.to_thread(Path(args.cells_json).write_text, json.dumps([c.__dict__ for c in cells]))
    for c in cells:
        for err in c.errors[:3]:
            print(f"  error ({c.size} x{c.clients} {c.path}): {err}")
    if args.smoke:
        await drop_queue_keys(args.redis_url, queue)
        paths = {c.path for c in cells}
        ok = (len(cells) == 5 and {"vector-only (in-process)", "merged, cold (HTTP /v1/search)"} <= paths
              and all(len(c.latencies_ms) == args.requests and not c.errors and c.wall_s > 0 for c in cells))
        return smoke_verdict(ok)
    return 1 if any(c.errors for c in cells) else 0


async def drop_queue_keys(redis_url: str, queue: str) -> None:
    """--smoke: remove the Redis keys of the bench's private queue (a plain run leaves them), bounded."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{queue}*", count=1000)][:10_000]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000", help="memories per user, comma-separated")
    p.add_argument("--clients", default="1,8", help="concurrent clients, comma-separated")
    p.add_argument("--requests", type=int, default=300, help="measured searches per cell")
    p.add_argument("--warmup", type=int, default=10, help="unmeasured searches before each cell")
    p.add_argument("--cell-seconds", type=float, default=120.0, help="time cap per cell")
    p.add_argument("--limit", type=int, default=10, help="search limit")
    p.add_argument("--vectors", choices=("local", "random"), default="local", help="how loaded memories are embedded")
    p.add_argument("--embedder", choices=("local", "hash"), default="local", help="service embedder (EMBEDDER)")
    p.add_argument("--chunk", type=int, default=1000, help="memories per store write")
    p.add_argument("--optimize", action="store_true",
                   help="at the end, build Qdrant Edge's HNSW index (the service never does) and measure again")
    p.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    p.add_argument("--neo4j-uri", default=None, help="existing Neo4j (default: start a private one)")
    p.add_argument("--neo4j-database", default="memory")
    p.add_argument("--neo4j-heap", default="1g", help="heap of the private Neo4j")
    p.add_argument("--neo4j-pagecache", default="512m", help="page cache of the private Neo4j")
    p.add_argument("--workdir", default=None, help="keep data here (default: a temp dir removed at the end)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir and the users' graph data")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-http", action="store_true", help="in-process cells only (no service process)")
    p.add_argument("--breakdown", action="store_true",
                   help="also: merged with a cold query embedding, and each retriever alone through the service")
    p.add_argument("--compare-ref", default=None,
                   help="git ref: measure its code and the working tree's, alternating, on --reuse data")
    p.add_argument("--after-ref", default=None,
                   help="with --compare-ref: measure this commit as \"after\" (default: the working tree)")
    p.add_argument("--rounds", type=int, default=2, help="--compare-ref rounds")
    p.add_argument("--cells-json", default=None, help=argparse.SUPPRESS)
    p.add_argument("--tag", default=None, help="user-name tag (bench-<size>-<tag>; default: random)")
    p.add_argument("--reuse", action="store_true",
                   help="skip loading: measure the memories a --keep run with this --workdir and --tag loaded")
    p.add_argument("--smoke", action="store_true",
                   help="a short check on the test stack: 200 memories, 1 client, 12 searches a cell, HTTP included")
    args = p.parse_args()
    if args.smoke:
        args.redis_url = os.environ.get("TEST_REDIS_URL", args.redis_url)
        args.neo4j_uri = os.environ.get("TEST_NEO4J_URI", args.neo4j_uri)
        args.neo4j_database = os.environ.get("TEST_NEO4J_DATABASE", args.neo4j_database)
        args.sizes, args.clients, args.requests, args.warmup, args.cell_seconds = "200", "1", 12, 2, 20.0
        args.vectors, args.embedder, args.keep, args.workdir, args.tag = "random", "hash", False, None, None
        args.optimize = args.breakdown = args.reuse = args.no_http = False
        args.compare_ref = None
    try:
        args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        args.clients = [int(x) for x in args.clients.split(",") if x.strip()]
    except ValueError:
        p.error("--sizes and --clients are comma-separated integers")
    if not args.sizes or min(args.sizes) < 1 or not args.clients or min(args.clients) < 1:
        p.error("--sizes and --clients need positive integers")
    if args.compare_ref and not args.reuse:
        p.error("--compare-ref measures data loaded before: it needs --reuse")
    if args.rounds < 1:
        p.error("--rounds >= 1")
    if args.reuse and not (args.workdir and args.tag and args.neo4j_uri):
        p.error("--reuse needs the --workdir, --tag and --neo4j-uri of the run that loaded the data")
    args.keep = args.keep or args.reuse  # never delete the data a later run reuses
    if args.requests < 1 or args.cell_seconds <= 0 or not 1 <= args.limit <= 100 or args.chunk < 1:
        p.error("--requests >= 1, --cell-seconds > 0, 1 <= --limit <= 100, --chunk >= 1")
    for url in (args.redis_url, args.neo4j_uri or "bolt://127.0.0.1"):
        host = httpx.URL(url.replace("bolt://", "http://").replace("neo4j://", "http://")
                         .replace("redis://", "http://")).host
        if host not in ("127.0.0.1", "localhost", "::1"):
            p.error(f"{url}: this bench targets 127.0.0.1 only")
    return args


if __name__ == "__main__":
    _args = parse_args()
    sys.exit(compare(_args) if _args.compare_ref else asyncio.run(main(_args)))
