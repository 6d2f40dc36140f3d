"""Console benchmark: each /ui page's latency for a user with `--size` (10,000) memories. Goal: p95 <= 300 ms.

    .venv/bin/python scripts/bench/console.py --redis-url redis://127.0.0.1:6379/0 \
        --neo4j-uri bolt://127.0.0.1:7687 [--neo4j-database neo4j] [--size 10000] [-n 40]

1. Load: the search benchmark's synthetic memories (scripts/bench/search.py `make_memories`: explicit graph links,
   a skewed entity pool), written through the product's store layer built by `service.deps.build_deps` (vectors:
   the hash embedder; nothing goes through the queue).
2. The app (`create_app`, lifespan included, AUTH_MODE=none on loopback) in this process behind httpx's ASGI
   transport, signed in as that user through /ui/login; each page is fetched `-n` times after one warm-up and its
   p50/p95/max printed. The graph view and the pages built on it read the user's entities and facts up to
   service/ui/graph.py's bounds, so their cost grows with the graph, not with the page.

`--smoke` (no other argument needed): the same on the test stack (TEST_REDIS_URL, TEST_NEO4J_URI,
TEST_NEO4J_DATABASE, default "memory") with --size 200 and -n 3, the user's graph nodes removed after; prints
`smoke: OK` when every page answered 200 and its row was printed, else `smoke: FAIL` (exit status 1).

Numbers depend on the machine and its load: say which when quoting them (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench.common import pct  # noqa: E402
from scripts.bench.procs import smoke_verdict  # noqa: E402
from scripts.bench.search import chunks, make_memories  # noqa: E402
from service.app import create_app  # noqa: E402
from service.core.settings import Settings  # noqa: E402
from service.deps import build_deps  # noqa: E402


def settings_for(args: argparse.Namespace, data: Path, queue: str) -> Settings:
    return Settings(_env_file=None, redis_url=args.redis_url, neo4j_uri=args.neo4j_uri,  # type: ignore[call-arg]
                    neo4j_database=args.neo4j_database, data_dir=data, qdrant_path=data / "qdrant",
                    arq_queue_name=queue, embedder="hash", google_api_key=None, log_level="ERROR",
                    auth_mode="none", rate_limit_reads_per_minute=0, rate_limit_writes_per_minute=0,
                    embedded_worker=False, dedup_cron_enabled=False, reconcile_cron_enabled=False)


async def load(settings: Settings, user: str, size: int) -> str:
    deps = await build_deps(settings)
    try:
        memories, links, _ = make_memories(user, size, 7)
        t0 = time.perf_counter()
        for part in chunks(memories, 1000):
            await deps.vectors.upsert(part, await deps.embedder.embed([m.content for m in part]))
        for m_part, l_part in zip(chunks(memories, 1000), chunks(links, 1000), strict=True):
            await deps.graph.memories.upsert_memories(m_part, l_part)  # type: ignore[attr-defined]
        print(f"loaded {size} memories for {user} in {time.perf_counter() - t0:.1f}s", flush=True)
        return str(memories[size // 2].id)
    finally:
        await deps.close()


async def main(args: argparse.Namespace) -> int:
    if args.smoke:
        return await smoke(args)
    await bench(args, f"bench-ui-{uuid.uuid4().hex[:6]}")
    return 0


async def bench(args: argparse.Namespace, user: str) -> tuple[int, list[tuple[str, float]]]:
    """Load, then time every page: (pages in all, (page, p50 ms) of each page timed)."""
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_for(args, Path(tmp), f"bench:ui:{user}")
        memory_id = await load(settings, user, args.size)
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as c:
                login = await c.get("/ui/login")
                csrf = re.search(r'name="csrf" value="([^"]+)"', login.text)
                assert csrf
                await c.post("/ui/login", data={"csrf": csrf.group(1), "user_id": user})
                pages = ["/ui/memories", "/ui/memories?category=convention", "/ui/search?q=which+database",
                         f"/ui/memories/{memory_id}", "/ui/graph", "/ui/graph?q=postgres", "/ui/review",
                         "/ui/activity", "/ui/health", "/ui/conversations", "/ui/runs"]
                print(f"{'page':42} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  (n={args.n}, size={args.size})")
                for page in pages:
                    first = await c.get(page)
                    assert first.status_code == 200, (page, first.status_code, first.text[:300])
                    times = []
                    for _ in range(args.n):
                        t0 = time.perf_counter()
                        resp = await c.get(page)
                        times.append((time.perf_counter() - t0) * 1000)
                        assert resp.status_code == 200
                    print(f"{page[:42]:42} {pct(times, 50):8.1f} {pct(times, 95):8.1f} {max(times):8.1f}",
                          flush=True)
                    rows.append((page, pct(times, 50)))
    return len(pages), rows


async def drop_user(args: argparse.Namespace, user: str) -> None:
    """Remove the user's graph nodes (--smoke only: a normal run keeps its user), in bounded batches."""
    async def run(tx: Any) -> int:
        rec = await (await tx.run("MATCH (n) WHERE n.user_id = $u WITH n LIMIT 5000 DETACH DELETE n "
                                  "RETURN count(*) AS n", u=user)).single()
        return int(rec["n"]) if rec else 0

    with tempfile.TemporaryDirectory() as tmp:
        deps = await build_deps(settings_for(args, Path(tmp), f"bench:ui:{user}"))
        try:
            for _ in range(100):  # bounded: a smoke user has a few hundred nodes
                if await deps.graph.executor.write(run) == 0:  # type: ignore[attr-defined]
                    return
        finally:
            await deps.close()


async def smoke(args: argparse.Namespace) -> int:
    """--smoke: a small user on the test stack, every page timed, then the verdict."""
    user = f"bench-ui-smoke-{uuid.uuid4().hex[:8]}"
    total, rows = 0, list[tuple[str, float]]()
    try:
        total, rows = await bench(args, user)
    except Exception as exc:  # a page did not answer 200, a store unreachable: the verdict says so
        print(f"error: {type(exc).__name__}: {exc}")
    finally:
        try:
            await drop_user(args, user)
        except Exception as exc:
            print(f"could not remove the user {user}: {type(exc).__name__}: {exc}")
    ok = total > 0 and len(rows) == total and all(p50 > 0 for _, p50 in rows)
    return smoke_verdict(ok)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-url", default=None, help="required unless --smoke")
    parser.add_argument("--neo4j-uri", default=None, help="required unless --smoke")
    parser.add_argument("--neo4j-database", default="neo4j")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("-n", type=int, default=40)
    parser.add_argument("--smoke", action="store_true", help="a short check on the test stack (TEST_* variables): "
                                                             "--size 200 -n 3, then `smoke: OK` or exit 1")
    args = parser.parse_args()
    if args.smoke:
        if not os.environ.get("TEST_REDIS_URL") or not os.environ.get("TEST_NEO4J_URI"):
            parser.error("--smoke needs TEST_REDIS_URL and TEST_NEO4J_URI (the test stack)")
        args.redis_url, args.neo4j_uri = os.environ["TEST_REDIS_URL"], os.environ["TEST_NEO4J_URI"]
        args.neo4j_database = os.environ.get("TEST_NEO4J_DATABASE", "memory")
        args.size, args.n = 200, 3
    elif not args.redis_url or not args.neo4j_uri:
        parser.error("--redis-url and --neo4j-uri are required (unless --smoke)")
    return args


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parse_args())))
