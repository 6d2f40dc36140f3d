"""Chaos benchmark: stream raw writes while the service is SIGKILLed and restarted, then check that
nothing was lost, nothing duplicated and nothing left stuck.

Starts its own private stack in a temp dir (Redis with AOF on, Neo4j through scripts/neo4j/run.sh,
`python -m service` in the embedded profile: API + its ARQ worker, a child process by default), all on 127.0.0.1:

    .venv/bin/python scripts/bench/chaos.py [-n 600] [--kills 20] [-c 4] [--users 2] \
        [--rate 30] [--embedder hash|local] [--job-timeout 30] [--timeout 600] [--seed 1] [--keep] [--src DIR] \
        [--smoke]

What it does (every loop is bounded in count and in time):

1. `-n` raw writes (`POST /v1/memories/raw`, unique contents over a small shared pool of people,
   places and tools so jobs contend on the same graph entities) from `-c` concurrent clients,
   spread over `--users` users, paced at `--rate` writes/s in all so the kills fall inside the
   stream. A write that fails at the transport level (service down) or with a 5xx is retried by
   its client (back-off 0.05-1 s, at most `--write-retry-s` per write) until it is accepted, so
   every intended write gets a task id. A retry of a write whose first answer was
   lost in the kill must get the same task id back (idempotency); if not, the check below sees a
   duplicate.
2. Meanwhile the service is SIGKILLed `--kills` times, at random points of the stream (after a
   random number of accepted writes, plus up to 50 ms), and restarted each time on the same port,
   DATA_DIR, Redis and Neo4j. Jobs a kill interrupts are rerun once the reaper sees their lease
   lapse (about 15-20 s; docs/write-path.md).
3. After the stream, every task is polled until it ends or `--timeout` seconds pass.
4. Checks, per intended write: lost = no task id, or its task did not complete, or its memory is
   missing from the Qdrant listing (`GET /v1/memories?user_id=`) or from the live graph episodes
   (`GET /v1/graph/episodes?user_id=`, no `deleted_at`, no `duplicate_of`). duplicated = a content
   stored more than once in either listing, or an id listed twice. stuck = tasks not ended;
   failed = tasks that ended `failed`. Also printed: orphans (ids listed that no task reported) and
   the time from the last kill until every task had ended.

`--src DIR` runs the service from another checkout of this repository (default: this one), e.g. a
`git archive HEAD` snapshot. Exit status: 1 when lost, duplicated, stuck or failed is not zero (or
the stack could not be started), else 0. Everything it started is stopped at the end; the temp dir
is removed unless `--keep`.

`--smoke`: 30 writes at 10/s, 1 kill, `--timeout 90`, the reaper sped up (SMOKE_ENV: a 5 s lease, reaped every
2 s), then `smoke: OK` when the kill was done and every write accepted and found with nothing lost, duplicated,
stuck or failed, else `smoke: FAIL` and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests.integration.procs importable from a checkout

from scripts.bench.common import PEOPLE, PLACES, RAW_CATEGORIES, TOOLS, pct  # noqa: E402
from scripts.bench.procs import free_port, smoke_or_fail, smoke_verdict, start_neo4j, stop, wait_port  # noqa: E402

TEMPLATES = (
    "{p1} met {p2} in {place} to talk about {tool}",
    "{p1} prefers {tool} over {tool2} for side projects",
    "{p1} lives in {place} and works with {p2}",
    "{p1} and {p2} deployed {tool} in {place}",
    "I use {tool} with {p1} every week",
    "{p1} works at the {place} office on {tool}",
)
POLL_INTERVAL = 0.5
PAGE_LIMIT = 500
MAX_PAGES = 10_000
STREAM_CAP_S = 3600.0  # hard cap on the write stream, whatever the per-write bound
SERVICE_START_S = 120.0
FINAL = ("completed", "failed")
# --smoke: a killed job's lease lapses in 5 s and the reaper looks every 2 s, so the smoke settles in seconds
SMOKE_ENV = {"TASK_LEASE_SECONDS": "5", "RECONCILE_INTERVAL_SECONDS": "2", "RECONCILE_GRACE_SECONDS": "1",
             "RECONCILE_CRON_ENABLED": "false"}




# --------------------------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------------------------


def start_redis_aof(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    """redis-server with AOF on (procs.start_redis turns persistence off)."""
    exe = shutil.which("redis-server")
    if not exe:
        raise RuntimeError("redis-server not found (scripts/test.sh or scripts/dev.sh installs it)")
    data = work / "redis"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--save", "",
         "--appendonly", "yes", "--appendfsync", "everysec"],
        stdout=(work / "redis.log").open("wb"), stderr=subprocess.STDOUT,
    )
    wait_port(port, proc, 20, "redis")
    return proc, port


@dataclass
class Service:
    """`python -m service` on a fixed port; restarted in place after each kill."""

    src: Path
    env: dict[str, str]
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    start_s: list[float] = field(default_factory=list)

    def start(self) -> None:
        last: Exception | None = None
        for _ in range(3):  # a port still held for a moment after a kill, or a slow start: try again
            t0 = time.perf_counter()
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "service"], cwd=self.src, env=self.env, stdout=log,
                    stderr=subprocess.STDOUT,
                )
            try:
                wait_port(self.port, self.proc, SERVICE_START_S, "service")
            except RuntimeError as exc:
                last = exc
                stop(self.proc, signal.SIGKILL)
                time.sleep(1.0)
                continue
            self.starts += 1
            self.start_s.append(time.perf_counter() - t0)
            return
        raise RuntimeError(f"service did not start: {last}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


def service_env(args: argparse.Namespace, work: Path, redis_port: int, neo4j_port: int, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "NEO4J_", "QDRANT_", "ARQ_"))}
    env.pop("GOOGLE_API_KEY", None)  # offline: raw writes never call the LLM anyway
    env.update({
        "HOST": "127.0.0.1", "PORT": str(port), "LOG_FORMAT": "json", "LOG_LEVEL": "INFO",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "NEO4J_URI": f"bolt://127.0.0.1:{neo4j_port}",
        "NEO4J_DATABASE": "memory", "DATA_DIR": str(work / "data"), "EMBEDDER": args.embedder,
        "ARQ_JOB_TIMEOUT": str(args.job_timeout), "DEDUP_CRON_ENABLED": "false",
    })
    # the local model's files, fetched by ./scripts/test.sh (or `python -m service models fetch`), unless set
    env.setdefault("MODEL_CACHE_DIR", str(ROOT / ".test-stack" / "models"))
    return env


# --------------------------------------------------------------------------------------------
# writes
# --------------------------------------------------------------------------------------------


@dataclass
class Write:
    index: int
    user: str
    content: str
    category: str
    task_id: str | None = None
    attempts: int = 0
    transport_errors: int = 0
    http_5xx: int = 0
    rejected: str | None = None  # a 4xx answer: not retried
    accept_ms: float = 0.0


@dataclass
class TaskState:
    task_id: str
    status: str = "queued"
    result: dict[str, Any] | None = None
    error: str | None = None
    ended_at: float | None = None  # monotonic

    def memory_ids(self) -> list[str]:
        if not self.result:
            return []
        return [str(m["id"]) for m in self.result.get("memories") or [] if isinstance(m, dict) and "id" in m]


@dataclass
class Run:
    writes: list[Write]
    accepted: int = 0
    stream_done: bool = False
    kills: int = 0
    last_kill: float | None = None  # monotonic
    kill_at_accepted: list[int] = field(default_factory=list)
    tasks: dict[str, TaskState] = field(default_factory=dict)


def make_writes(n: int, users: list[str], tag: str, rng: random.Random) -> list[Write]:
    out: list[Write] = []
    for i in range(n):
        p1, p2 = rng.sample(PEOPLE, 2)
        tool, tool2 = rng.sample(TOOLS, 2)
        text = rng.choice(TEMPLATES).format(p1=p1, p2=p2, tool=tool, tool2=tool2, place=rng.choice(PLACES))
        out.append(Write(i, users[i % len(users)], f"{text} (chaos {tag} #{i})", rng.choice(RAW_CATEGORIES)))
    return out


async def submit(client: httpx.AsyncClient, w: Write, retry_s: float, rng: random.Random, *,
                 path: str = "/v1/memories/raw", body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
    """Send one write until it is accepted (202), rejected (4xx) or `retry_s` is spent, resent on transport errors
    and 5xx; by default the raw write of `w` (`path`, `body`, `headers`: another kind of write)."""
    body = body or {"content": w.content, "user_id": w.user, "category": w.category}
    deadline = time.monotonic() + retry_s
    delay = 0.05
    for _ in range(10_000):
        if time.monotonic() >= deadline:
            return
        w.attempts += 1
        t0 = time.perf_counter()
        try:
            resp = await client.post(path, json=body, headers=headers)
        except httpx.HTTPError:
            w.transport_errors += 1
        else:
            if resp.status_code == 202:
                w.task_id = str(resp.json()["task_id"])
                w.accept_ms = (time.perf_counter() - t0) * 1000
                return
            if resp.status_code < 500:
                w.rejected = f"HTTP {resp.status_code}: {resp.text[:200]}"
                return
            w.http_5xx += 1
        await asyncio.sleep(delay * (0.5 + rng.random()))
        delay = min(delay * 2, 1.0)


async def stream(client: httpx.AsyncClient, run: Run, args: argparse.Namespace) -> None:
    todo = iter(run.writes)
    deadline = time.monotonic() + STREAM_CAP_S

    next_slot = time.monotonic()

    async def worker(i: int) -> None:
        nonlocal next_slot
        rng = random.Random(args.seed * 7919 + i)
        for w in todo:  # shared iterator: each write is taken by one client
            now = time.monotonic()
            if now >= deadline:
                return
            if args.rate > 0:  # pace the stream: one slot every 1/rate s, no catch-up burst after a kill
                wait, next_slot = max(0.0, next_slot - now), max(next_slot, now) + 1 / args.rate
                await asyncio.sleep(wait)
            await submit(client, w, args.write_retry_s, rng)
            if w.task_id is not None:
                run.accepted += 1

    try:
        await asyncio.gather(*(worker(i) for i in range(args.c)))
    finally:
        run.stream_done = True


async def killer(service: Service, run: Run, args: argparse.Namespace, rng: random.Random) -> None:
    """SIGKILLs the service when the accepted count passes each of `--kills` random thresholds."""
    n = len(run.writes)
    thresholds = sorted(rng.sample(range(1, n), min(args.kills, n - 1))) if n > 1 else []
    deadline = time.monotonic() + STREAM_CAP_S
    for threshold in thresholds:
        for _ in range(int(STREAM_CAP_S / 0.01)):
            if run.accepted >= threshold or run.stream_done or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.01)
        if run.stream_done or time.monotonic() >= deadline:
            return
        await asyncio.sleep(rng.uniform(0, 0.05))  # land at varied points of the jobs in flight
        if run.stream_done:
            return
        await asyncio.to_thread(service.kill)
        run.kills += 1
        run.last_kill = time.monotonic()
        run.kill_at_accepted.append(run.accepted)
        await asyncio.to_thread(service.start)
        print(f"  kill {run.kills}/{len(thresholds)} at {run.kill_at_accepted[-1]} accepted; "
              f"restarted in {service.start_s[-1]:.1f}s", flush=True)


async def poll_until_settled(client: httpx.AsyncClient, run: Run, limit_s: float) -> None:
    pending = {w.task_id for w in run.writes if w.task_id is not None}
    for tid in pending:
        run.tasks.setdefault(tid, TaskState(tid))
    sem = asyncio.Semaphore(16)

    async def poll(tid: str) -> None:
        async with sem:
            try:
                resp = await client.get(f"/v1/memories/status/{tid}")
            except httpx.HTTPError:
                return
        ts = run.tasks[tid]
        if resp.status_code == 404:
            ts.status, ts.error = "failed", "unknown or expired task (404)"
        elif resp.status_code == 200:
            data = resp.json()
            ts.status, ts.result, ts.error = str(data.get("status")), data.get("result"), data.get("error")
        if ts.status in FINAL:
            ts.ended_at = time.monotonic()
            pending.discard(tid)

    deadline = time.monotonic() + limit_s
    t0 = time.monotonic()
    last_print = t0
    for _ in range(int(limit_s / POLL_INTERVAL) + 10):
        if not pending or time.monotonic() >= deadline:
            return
        await asyncio.gather(*(poll(t) for t in list(pending)))
        if pending and time.monotonic() - last_print >= 15:
            last_print = time.monotonic()
            print(f"  [{last_print - t0:5.0f}s] waiting for {len(pending)} tasks", flush=True)
        await asyncio.sleep(POLL_INTERVAL)


async def page_all(client: httpx.AsyncClient, path: str, user: str, key: str,
                   extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every item of a listing for a user, page by page (`extra`: more query parameters)."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params: dict[str, Any] = {"user_id": user, "limit": PAGE_LIMIT, **(extra or {})}
        if cursor:
            params["cursor"] = cursor
        resp: httpx.Response | None = None
        for attempt in range(5):
            with contextlib.suppress(httpx.HTTPError):
                resp = await client.get(path, params=params)
                break
            await asyncio.sleep(0.5 * (attempt + 1))
        if resp is None or resp.status_code != 200:
            answer = "transport error" if resp is None else f"HTTP {resp.status_code}: {resp.text[:200]}"
            raise RuntimeError(f"{path}?user_id={user}: {answer}")
        body = resp.json()
        items += list(body.get(key) or [])
        cursor = body.get("next_cursor")
        if not cursor:
            return items
    raise RuntimeError(f"{path}?user_id={user}: more than {MAX_PAGES} pages")


# --------------------------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------------------------


@dataclass
class Checks:
    lost: int = 0
    lost_no_task: int = 0
    lost_not_completed: int = 0
    lost_missing_qdrant: int = 0
    lost_missing_graph: int = 0
    dup_content_qdrant: int = 0
    dup_content_graph: int = 0
    dup_id_qdrant: int = 0
    dup_id_graph: int = 0
    orphans_qdrant: int = 0
    orphans_graph: int = 0
    stuck: int = 0
    failed: int = 0
    shared_task_ids: int = 0  # distinct intended writes answered with one task id
    in_qdrant: int = 0
    in_graph: int = 0
    samples: list[str] = field(default_factory=list)

    @property
    def duplicated(self) -> int:
        return self.dup_content_qdrant + self.dup_content_graph + self.dup_id_qdrant + self.dup_id_graph


async def check(client: httpx.AsyncClient, run: Run, users: list[str]) -> Checks:
    c = Checks()
    vec: list[dict[str, Any]] = []
    graph: list[dict[str, Any]] = []
    for user in users:
        vec += await page_all(client, "/v1/memories", user, "memories")
        graph += [m for m in await page_all(client, "/v1/graph/episodes", user, "items")
                  if not m.get("deleted_at") and not m.get("duplicate_of")]
    vec_ids = Counter(str(m["id"]) for m in vec)
    graph_ids = Counter(str(m["id"]) for m in graph)
    c.in_qdrant, c.in_graph = len(vec_ids), len(graph_ids)
    for name, counter in (("qdrant", Counter(str(m.get("content")).strip() for m in vec)),
                          ("graph", Counter(str(m.get("content")).strip() for m in graph))):
        dups = {k: v for k, v in counter.items() if v > 1}
        setattr(c, f"dup_content_{name}", len(dups))
        c.samples += [f"content x{v} in {name}: {k[:80]}" for k, v in list(dups.items())[:2]]
    c.dup_id_qdrant = sum(1 for v in vec_ids.values() if v > 1)
    c.dup_id_graph = sum(1 for v in graph_ids.values() if v > 1)

    reported: set[str] = set()
    for ts in run.tasks.values():
        reported.update(ts.memory_ids())
    c.orphans_qdrant = len(set(vec_ids) - reported)
    c.orphans_graph = len(set(graph_ids) - reported)
    c.stuck = sum(ts.status not in FINAL for ts in run.tasks.values())
    c.failed = sum(ts.status == "failed" for ts in run.tasks.values())
    c.shared_task_ids = sum(n - 1 for n in Counter(w.task_id for w in run.writes if w.task_id).values() if n > 1)

    for w in run.writes:
        why = None
        if w.task_id is None:
            c.lost_no_task += 1
            why = f"no task id ({w.rejected or f'{w.attempts} attempts'})"
        else:
            ts = run.tasks[w.task_id]
            ids = ts.memory_ids()
            if ts.status != "completed" or not ids:
                c.lost_not_completed += 1
                why = f"task {w.task_id} {ts.status}: {ts.error}"
            elif any(i not in vec_ids for i in ids):
                c.lost_missing_qdrant += 1
                why = f"memory {ids[0]} not in qdrant"
            elif any(i not in graph_ids for i in ids):
                c.lost_missing_graph += 1
                why = f"memory {ids[0]} not in the live graph"
        if why:
            c.lost += 1
            if len(c.samples) < 12:
                c.samples.append(f"lost #{w.index}: {why}")
    return c


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def log_tail(path: Path, lines: int = 15) -> str:
    if not path.exists():
        return ""
    tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    return "\n".join(line[:400] for line in tail)


async def main(args: argparse.Namespace) -> int:
    tag = uuid.uuid4().hex[:8]
    rng = random.Random(args.seed)
    users = [f"chaos-{tag}-u{i}" for i in range(args.users)]
    work = Path(tempfile.mkdtemp(prefix="bench-chaos-"))
    run = Run(make_writes(args.n, users, tag, rng))
    redis_proc: subprocess.Popen[bytes] | None = None
    neo4j_proc: subprocess.Popen[bytes] | None = None
    service: Service | None = None
    checks: Checks | None = None
    settle_s: float | None = None
    t_start = time.perf_counter()
    print(f"work dir {work}  n={args.n}  kills={args.kills}  c={args.c}  users={args.users}  "
          f"embedder={args.embedder}  ARQ_JOB_TIMEOUT={args.job_timeout}  src={args.src}", flush=True)
    try:
        redis_proc, redis_port = await asyncio.to_thread(start_redis_aof, work)
        t0 = time.perf_counter()
        neo4j_proc, neo4j_port = await asyncio.to_thread(start_neo4j, work)
        print(f"redis 127.0.0.1:{redis_port} (AOF)  neo4j bolt://127.0.0.1:{neo4j_port} "
              f"ready in {time.perf_counter() - t0:.0f}s", flush=True)
        port = free_port()
        env = service_env(args, work, redis_port, neo4j_port, port)
        if args.smoke:
            env.update(SMOKE_ENV)
        service = Service(args.src, env, port, work / "service.log")
        await asyncio.to_thread(service.start)
        print(f"service 127.0.0.1:{port} up in {service.start_s[-1]:.1f}s", flush=True)

        limits = httpx.Limits(max_connections=args.c + 20, max_keepalive_connections=args.c + 20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0, limits=limits) as client:
            t_stream = time.perf_counter()
            await asyncio.gather(stream(client, run, args), killer(service, run, args, random.Random(args.seed + 1)))
            stream_s = time.perf_counter() - t_stream
            accepted = sum(w.task_id is not None for w in run.writes)
            print(f"stream: {accepted}/{args.n} accepted in {stream_s:.1f}s, {run.kills} kills; "
                  f"retried writes {sum(w.attempts > 1 for w in run.writes)}, "
                  f"transport errors {sum(w.transport_errors for w in run.writes)}, "
                  f"5xx {sum(w.http_5xx for w in run.writes)}", flush=True)
            t_settle0 = time.monotonic()
            await poll_until_settled(client, run, args.timeout)
            ends = [ts.ended_at for ts in run.tasks.values() if ts.ended_at is not None]
            all_ended = all(ts.status in FINAL for ts in run.tasks.values())
            ref = run.last_kill if run.last_kill is not None else t_settle0
            if all_ended:
                settle_s = max(0.0, max(ends, default=ref) - ref)
            checks = await check(client, run, users)
    except BaseException:
        if service is not None:
            print("last lines of the service log:\n" + log_tail(service.log_path), flush=True)
        raise
    finally:
        if service is not None:
            await asyncio.to_thread(service.stop)
        if neo4j_proc is not None:
            await asyncio.to_thread(stop, neo4j_proc)
        if redis_proc is not None:
            await asyncio.to_thread(stop, redis_proc)
        if args.keep:
            print(f"kept {work} (service.log, neo4j.log, redis/, data/)")
        else:
            shutil.rmtree(work, ignore_errors=True)

    assert checks is not None and service is not None
    starts = service.start_s[1:]
    accept_ms = [w.accept_ms for w in run.writes if w.task_id is not None]
    rows = [
        ("intended writes / accepted", f"{len(run.writes)} / {sum(w.task_id is not None for w in run.writes)}"),
        ("kills done / restarts", f"{run.kills} / {len(starts)} (restart p50 {pct(starts, 50):.1f}s, "
                                  f"max {pct(starts, 100):.1f}s)"),
        ("accept p50 / p99 ms (last attempt)", f"{pct(accept_ms, 50):.1f} / {pct(accept_ms, 99):.1f}"),
        ("in qdrant / in live graph", f"{checks.in_qdrant} / {checks.in_graph}"),
        ("lost", f"{checks.lost}  (no task {checks.lost_no_task}, not completed {checks.lost_not_completed}, "
                 f"missing in qdrant {checks.lost_missing_qdrant}, missing in graph {checks.lost_missing_graph})"),
        ("duplicated", f"{checks.duplicated}  (content twice: qdrant {checks.dup_content_qdrant}, graph "
                       f"{checks.dup_content_graph}; id twice: qdrant {checks.dup_id_qdrant}, "
                       f"graph {checks.dup_id_graph})"),
        ("stuck", str(checks.stuck)),
        ("failed", str(checks.failed)),
        ("orphans (ids no task reports)", f"qdrant {checks.orphans_qdrant}, graph {checks.orphans_graph}"),
        ("writes sharing a task id", str(checks.shared_task_ids)),
        ("settle after last kill", "not settled" if settle_s is None else f"{settle_s:.1f}s"),
        ("wall time", f"{time.perf_counter() - t_start:.1f}s"),
    ]
    print("\n--- chaos summary ---")
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    errors = Counter(ts.error for ts in run.tasks.values() if ts.status == "failed")
    for err, n in errors.most_common(5):
        print(f"  failed x{n}: {err}")
    for sample in checks.samples[:12]:
        print(f"  e.g. {sample}")
    bad = {k: v for k, v in (("lost", checks.lost), ("duplicated", checks.duplicated), ("stuck", checks.stuck),
                             ("failed", checks.failed)) if v}
    print(f"\nresult: {'FAIL ' + str(bad) if bad else 'OK'}")
    if args.smoke:
        ok = (not bad and run.kills == args.kills and len(starts) == args.kills
              and all(w.task_id is not None for w in run.writes)
              and checks.in_qdrant >= args.n and checks.in_graph >= args.n)
        if smoke_verdict(ok):
            return 1
    return 1 if bad else 0


async def run_main(args: argparse.Namespace) -> int:
    """main; with --smoke, an error is a `smoke: FAIL` too (after its traceback)."""
    return await (smoke_or_fail(lambda: main(args)) if args.smoke else main(args))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=600, help="raw writes in all")
    p.add_argument("--kills", type=int, default=20, help="SIGKILLs of the service during the stream")
    p.add_argument("-c", type=int, default=4, help="concurrent clients")
    p.add_argument("--rate", type=float, default=30.0, help="writes per second in all (0 = as fast as accepted)")
    p.add_argument("--users", type=int, default=2, choices=(1, 2), help="users the writes are spread over")
    p.add_argument("--embedder", choices=("hash", "local"), default="hash", help="EMBEDDER of the service")
    p.add_argument("--job-timeout", type=int, default=30, help="ARQ_JOB_TIMEOUT of the service (seconds)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every task to end")
    p.add_argument("--write-retry-s", type=float, default=180.0, help="how long one write is retried at most")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--src", default=str(ROOT), help="checkout the service runs from (default: this one)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs and data)")
    p.add_argument("--smoke", action="store_true",
                   help="a short check: 30 writes at 10/s, 1 kill, --timeout 90, a fast reaper; smoke: OK or FAIL")
    args = p.parse_args()
    if args.smoke:
        args.n, args.kills, args.c, args.rate, args.timeout, args.write_retry_s = 30, 1, 4, 10.0, 90.0, 60.0
    if args.n < 1 or args.c < 1 or args.kills < 0 or args.timeout <= 0 or args.job_timeout < 1:
        p.error("-n and -c must be >= 1, --kills >= 0, --timeout > 0, --job-timeout >= 1")
    args.src = Path(args.src).resolve()
    if not (args.src / "service" / "__main__.py").is_file():
        p.error(f"--src {args.src}: not a checkout of this repository (no service/__main__.py)")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(run_main(parse_args())))
