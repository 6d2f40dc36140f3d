"""Several worker processes on one deployment, with and without user-sharded queues, side by side in one run.

    .venv/bin/python scripts/bench/scale_out.py --redis-url redis://127.0.0.1:6379/0 \
        --neo4j-uri bolt://127.0.0.1:7687 [--workers 1,2,4] [-n 400] [-c 16] [--embedder hash] [--smoke]

For each worker count N it starts `python -m service` (embedded profile) with WORKER_PROCESS=child and
WORKER_PROCESSES=N: N worker processes on the API process's vector store (its Unix socket), each its own ARQ
worker, embedder and graph writer. Sharding off: WORKER_SHARDS=1, every worker polls the one queue, so one user's
jobs run in several processes at once. Sharding on: WORKER_SHARDS=N, each worker its own shard
(service/tasks/shards.py).
`-n` raw writes, one hot user taking half of them and 16 users the rest, each memory naming people and places of a
small shared pool (the hot user's graph is one dense cluster), sent by `-c` concurrent clients.

Per run: completed writes/s (first request to last completion), failed jobs, the deadlock and transient retries
of the graph transactions (/health `write_path`, every worker's), tasks still pending (stuck) at the end, and
whether every completed memory is in both stores (Qdrant Edge and Neo4j counts per user, after the service
stopped). On 2 cores, throughput cannot grow with N: the point is correctness and contention.

`--smoke`: one run, 2 workers with sharding on, 24 writes from 4 clients, on the test stack (TEST_REDIS_URL,
TEST_NEO4J_URI, TEST_NEO4J_DATABASE unless given), then `smoke: OK` when its row shows every write completed in both
stores at a rate > 0 with nothing failed or stuck, else `smoke: FAIL` and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench import graph_probe as probe  # noqa: E402
from scripts.bench.common import PEOPLE, PLACES, TOOLS, fetch, fetch_retrying  # noqa: E402
from scripts.bench.procs import free_port, smoke_or_fail, smoke_verdict, stop, wait_port  # noqa: E402
from service.identity.rules import NameRules  # noqa: E402
from service.stores.neo4j.store import Neo4jGraphStore  # noqa: E402
from service.stores.qdrant_edge import EdgeVectorStore  # noqa: E402
from service.stores.vector import MemoryFilter  # noqa: E402


@dataclass
class Run:
    workers: int
    sharded: bool
    seconds: float = 0.0
    completed: int = 0
    failed: int = 0
    deadlocks: int = 0
    transient: int = 0
    stuck: int = 0
    in_both: bool = False
    refused: int = 0  # 503 answers to the load client (retried)

    @property
    def rate(self) -> float:
        return self.completed / self.seconds if self.seconds else 0.0


def content(rng: random.Random, i: int) -> str:
    a, b = rng.sample(PEOPLE, 2)
    return f"{a} met {b} in {rng.choice(PLACES)} to talk about {rng.choice(TOOLS)} (note {i})"


async def one_run(args: argparse.Namespace, workers: int, sharded: bool) -> Run:
    run = Run(workers, sharded)
    data = Path(tempfile.mkdtemp(prefix="scale-out-"))
    tag = uuid.uuid4().hex[:8]
    hot, others = f"hot-{tag}", [f"user-{tag}-{k}" for k in range(16)]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "NEO4J_", "QDRANT_", "ARQ_"))}
    env.update({"REDIS_URL": args.redis_url, "NEO4J_URI": args.neo4j_uri, "NEO4J_DATABASE": args.database,
                "DATA_DIR": str(data), "ARQ_QUEUE_NAME": f"bench:scale:{tag}", "EMBEDDER": args.embedder,
                "WORKER_PROCESS": "child", "WORKER_PROCESSES": str(workers),
                "WORKER_SHARDS": str(workers if sharded else 1), "WORKER_PROCESS_NICE": "0",
                "HOST": "127.0.0.1", "PORT": str(port), "LOG_FORMAT": "json", "LOG_LEVEL": "WARNING",
                "RECONCILE_INTERVAL_SECONDS": "5", "DEDUP_CRON_ENABLED": "false", "RECONCILE_CRON_ENABLED": "false",
                "RATE_LIMIT_WRITES_PER_MINUTE": "0", "RATE_LIMIT_READS_PER_MINUTE": "0"})
    log = (data / "service.log").open("ab")
    proc = await asyncio.to_thread(subprocess.Popen, [sys.executable, "-m", "service"], cwd=ROOT, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
    rng = random.Random(args.seed)
    users = [hot if i % 2 == 0 else others[(i // 2) % len(others)] for i in range(args.n)]
    per_user: dict[str, int] = {}
    try:
        await asyncio.to_thread(wait_port, port, proc, 180, "service")
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", timeout=aiohttp.ClientTimeout(60)) as http:
            # warm-up: one write per worker's shard reaches a running worker before the clock starts
            warm = [(await fetch(http, "POST", "/v1/memories/raw", json={
                "content": f"warm-up {k}", "user_id": f"warm-{tag}-{k}", "category": "preference"})).json()["task_id"]
                for k in range(4 * workers)]
            await wait_all(http, warm, 180)
            sem = asyncio.Semaphore(args.concurrency)

            def refused() -> None:
                run.refused += 1

            async def write(i: int) -> str:
                body = {"content": content(rng, i), "user_id": users[i], "category": "personal_fact"}
                async with sem:  # a client retrying a 503 (Redis slower than REDIS_TIMEOUT_SECONDS)
                    ans = await fetch_retrying(http, "POST", "/v1/memories/raw", json=body, tries=40,
                                               pause_s=lambda _: 0.5, retry_statuses=(503,), on_retry=refused)
                    assert ans.status_code == 202, ans.text
                    return str(ans.json()["task_id"])

            t0 = time.perf_counter()
            tasks = await asyncio.gather(*(write(i) for i in range(args.n)))
            ends = await wait_all(http, tasks, args.timeout)
            run.seconds = time.perf_counter() - t0
            run.completed = sum(1 for s in ends.values() if s == "completed")
            run.failed = sum(1 for s in ends.values() if s == "failed")
            for i, t in enumerate(tasks):
                if ends.get(t) == "completed":
                    per_user[users[i]] = per_user.get(users[i], 0) + 1
            await asyncio.sleep(1.0)  # the workers' retry counters land after the status (worker/jobs.py finally)
            health = (await fetch(http, "GET", "/health")).json()["write_path"]
            run.deadlocks = int(health.get("deadlock_retries", 0))
            run.transient = int(health.get("graph_transient_retries", 0))
            run.stuck = int(health.get("pending_tasks") or 0)
    finally:
        await asyncio.to_thread(stop, proc)
    # --smoke runs on the shared test stack: its warm-up users' graph goes too
    drop = [f"warm-{tag}-{k}" for k in range(4 * workers)] if args.smoke else []
    run.in_both = await in_both_stores(args, data, per_user, drop)
    shutil.rmtree(data, ignore_errors=True)
    return run


async def wait_all(http: aiohttp.ClientSession, tasks: list[str], within_s: float) -> dict[str, str]:
    ends: dict[str, str] = {}
    deadline = time.monotonic() + within_s
    for _ in range(int(within_s / 0.2) + 1):  # bounded in count and time
        for t in [t for t in tasks if t not in ends]:
            body: dict[str, Any] = (await fetch(http, "GET", f"/v1/memories/status/{t}")).json()
            if body["status"] in ("completed", "failed"):
                ends[t] = body["status"]
            else:
                break  # the rest are later in the queue: look again shortly
        if len(ends) == len(tasks) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    return ends


async def in_both_stores(args: argparse.Namespace, data: Path, per_user: dict[str, int],
                         also_drop: list[str] | None = None) -> bool:
    vectors = EdgeVectorStore(data / "qdrant", "memory_platform")
    graph = Neo4jGraphStore(args.neo4j_uri, "neo4j", None, args.database, 10.0, NameRules())
    ok = True
    try:
        await vectors.ensure_collection(384, f"{args.embedder}-384")
        for user, n in per_user.items():
            v, g = await vectors.count(MemoryFilter(user_id=user)), await probe.count_memories(graph, user)
            if v != n or g != n:
                print(f"  {user}: {n} completed, {v} in Qdrant, {g} in Neo4j", file=sys.stderr)
                ok = False
        async def drop(tx: Any) -> None:
            await (await tx.run("MATCH (n) WHERE n.user_id IN $users DETACH DELETE n",
                                users=[*per_user, *(also_drop or [])])).consume()
        await graph.executor.write(drop)
    finally:
        await vectors.close()
        await graph.close()
    return ok


def row(r: Run) -> str:
    return (f"{r.workers:>7} {'on' if r.sharded else 'off':>9} {r.seconds:>8.1f} {r.rate:>9.1f} {r.completed:>10} "
            f"{r.failed:>7} {r.deadlocks:>17} {r.transient:>10} {r.stuck:>6} {'yes' if r.in_both else 'NO':>15} "
            f"{r.refused:>14}")


async def main(args: argparse.Namespace) -> int:
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average before the run {load[0]:.2f} / {load[1]:.2f} / "
          f"{load[2]:.2f} (1/5/15 min){' - LOADED: other work is running' if load[0] > 0.5 else ''}")
    runs: list[Run] = []
    plan = [(n, sharded) for n in args.workers for sharded in ((False,) if n == 1 else (False, True))]
    if args.smoke:
        plan = [(n, sharded) for n, sharded in plan if sharded]
    for n, sharded in plan:
        r = await one_run(args, n, sharded)
        runs.append(r)
        print(f"  done: {row(r)}", flush=True)
    print(f"\n{args.n} raw writes, half of them one hot user's, {args.concurrency} clients, embedder {args.embedder}; "
          f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"{'workers':>7} {'sharding':>9} {'seconds':>8} {'writes/s':>9} {'completed':>10} {'failed':>7} "
          f"{'deadlock retries':>17} {'transient':>10} {'stuck':>6} {'in both stores':>15} {'503 (retried)':>14}")
    for r in runs:
        print(row(r))
    bad = [r for r in runs if r.sharded and (r.failed or r.deadlocks or r.stuck or not r.in_both)]
    if args.smoke:
        ok = bool(runs) and not bad and all(
            r.completed == args.n and r.rate > 0 and not r.failed and not r.stuck and r.in_both for r in runs)
        if smoke_verdict(ok):
            return 1
    return 1 if bad or any(not r.in_both or r.stuck for r in runs) else 0


async def run_main(args: argparse.Namespace) -> int:
    """main; with --smoke, an error is a `smoke: FAIL` too (after its traceback)."""
    return await (smoke_or_fail(lambda: main(args)) if args.smoke else main(args))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--redis-url", default=None, help="default redis://127.0.0.1:6379/0 (--smoke: TEST_REDIS_URL)")
    p.add_argument("--neo4j-uri", default=None, help="default bolt://127.0.0.1:7687 (--smoke: TEST_NEO4J_URI)")
    p.add_argument("--database", default=None, help="default memory (--smoke: TEST_NEO4J_DATABASE)")
    p.add_argument("--workers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    p.add_argument("-n", type=int, default=400)
    p.add_argument("-c", "--concurrency", type=int, default=16)
    p.add_argument("--embedder", default="hash", choices=["hash", "local"])
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--smoke", action="store_true",
                   help="a short check on the test stack: 2 workers sharded, 24 writes, 4 clients; smoke: OK or FAIL")
    args = p.parse_args()
    env = os.environ if args.smoke else {}
    args.redis_url = args.redis_url or env.get("TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
    args.neo4j_uri = args.neo4j_uri or env.get("TEST_NEO4J_URI") or "bolt://127.0.0.1:7687"
    args.database = args.database or env.get("TEST_NEO4J_DATABASE") or "memory"
    if args.smoke:
        args.workers, args.n, args.concurrency, args.timeout = [2], 24, 4, 90.0
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(run_main(parse_args())))
