"""Starve benchmark ("a write is never lost to a slow machine"): stream raw and conversation writes
while one fault starves the service of CPU, Redis, Neo4j or its worker, then check that nothing was lost,
nothing duplicated and nothing left stuck, and how long writes took.

Starts its own private stack in a temp dir for each row (Redis with AOF on, Neo4j through scripts/neo4j/run.sh,
`python -m service` in the embedded profile: API + its ARQ worker children), all on 127.0.0.1, as chaos.py does:

    .venv/bin/python scripts/bench/starve.py [--fault cpu|redis-pause|neo4j-stop|worker-kill|none|all] \
        [--fault-s 60] [--fault-delay 3] [-n 300] [-c 4] [--users 4] [--workers 1,2,4] [--rate 0] \
        [--conv-share 0.5] [--budget-s 900] [--embedder hash|local] [--job-timeout 300] [--timeout 600] \
        [--write-retry-s 600] [--seed 1] [--keep] [--smoke]

What it does (every loop is bounded in count and in time):

1. `-n` writes from `-c` concurrent clients over `--users` users, paced at `--rate` writes/s in all (0, the
   default: spread over the fault's window, `--fault-delay` + `--fault-s` + 5 s, so writes arrive before, during
   and after it). About `--conv-share` of them are conversation writes (`POST /v1/memories`, one first-person user
   message the offline extractor turns into zero, one or two facts), the rest raw writes (`POST
   /v1/memories/raw`, chaos.py's contents). Every write is unique and carries an Idempotency-Key; one that fails at
   the transport level or with a 5xx is resent (back-off 0.05-1 s, at most `--write-retry-s` per write) until it
   is accepted.
2. `--fault-delay` seconds after the stream starts, ONE fault (`--fault`) runs:
   cpu          `stress-ng --cpu <3 x cpu count> --timeout <fault-s>s` (installed with apt-get if missing);
   redis-pause  `CLIENT PAUSE <fault-s x 1000> ALL` on the bench's Redis (it ends by itself);
   neo4j-stop   SIGSTOP to the Neo4j JVM for `--fault-s` seconds, then SIGCONT (always, in a finally);
   worker-kill  SIGKILL to the service's worker children (`python -m worker.child`) once half the writes are
                accepted; the API process restarts them;
   none         the baseline.
   `--fault all` runs each of them in turn, each on a fresh stack. The service runs with
   WRITE_RETRY_BUDGET_SECONDS=`--budget-s` (longer than the fault: a slow dependency delays a write, it must not
   fail it), LLM_PROVIDER=offline, and WORKER_PROCESSES = WORKER_SHARDS = each value of `--workers` (a row each).
3. Every accepted task is polled (`GET /v1/memories/status/{id}`, rounds at most every 0.5 s: a round over many
   pending tasks may take longer, which is then the latency's resolution) from its 202 until it ends, or until
   `--timeout` seconds after the stream; every status seen is kept (`retrying`, with its `retry` object, counts
   in seen_retrying). `GET /health` is read every 2 s for each process's event-loop figures (`write_path.loops`).
4. Checks, per intended write: lost = no task id, or its task did not end `completed`; for a raw write also its
   memory missing from the Qdrant listing (`GET /v1/memories?user_id=&include_superseded=true`) or from the live
   graph episodes (`GET /v1/graph/episodes?user_id=`, no `deleted_at`, no `duplicate_of`). A conversation write may
   give several memories or none, so it is lost only when its task did not complete. duplicated = a raw write's
   content stored more than once in either listing, or an id listed twice. stuck = tasks not ended; failed = tasks
   ended `failed`.

One Markdown row per (fault, workers): accepted, completed, failed, lost, duplicated, stuck, seen_retrying, p50 /
p99 seconds from the 202 to the first poll that saw `completed`, peak event-loop lag (the most `peak_s` or
`recent_peak_s` of any process in any /health sample) and peak concurrency (the most `jobs_peak` of a worker
process); "n/a" where /health did not give them. `--smoke`: redis-pause for 3 s, 12 writes, 2 users, 1 worker,
`--timeout 120`, asserting the table was printed with nothing failed or lost. Exit status: 1 when any row has
failed, lost, duplicated or stuck writes (or a stack could not be started), 2 when `--fault cpu` cannot get
stress-ng, else 0. Everything it started is stopped (and Neo4j SIGCONTed) at the end; the temp dirs are removed
unless `--keep`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
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
import redis.asyncio as aioredis

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # scripts.bench importable from a checkout

from scripts.bench.chaos import (  # noqa: E402
    FINAL,
    Checks,
    Run,
    Service,
    TaskState,
    Write,
    log_tail,
    make_writes,
    page_all,
    service_env,
    start_redis_aof,
    submit,
)
from scripts.bench.common import PEOPLE, PLACES, TOOLS, pct  # noqa: E402
from scripts.bench.procs import free_port, start_neo4j, stop  # noqa: E402

FAULTS = ("none", "cpu", "redis-pause", "neo4j-stop", "worker-kill")
COMPANIES = ("Acme", "Globex", "Initech", "Umbrella", "Hooli")
PROJECTS = ("Atlas", "Borealis", "Cobalt", "Delta", "Ember")
# First-person sentences the offline extractor turns into facts (one template gives none: a write may give none).
CONVERSATIONS = (
    "I live in {place} and I work at {company} on the {project} project",
    "I prefer {tool} over {tool2} for side projects",
    "My manager is {p1} and I use {tool} every day",
    "I prefer tabs over spaces when I write {tool}",
    "I decided to move the {project} project to {tool}",
    "I moved to {place} last year and I now use {tool} at {company}",
    "I work with {p1} and {p2} on {tool} in {place}",
)
POLL_INTERVAL = 0.5
HEALTH_INTERVAL = 2.0
POLL_CONCURRENCY = 8
STREAM_CAP_S = 3600.0  # hard cap on the write stream, whatever the per-write bound
STRESS_INSTALL_S = 300.0


# --------------------------------------------------------------------------------------------
# writes
# --------------------------------------------------------------------------------------------


@dataclass
class Track:
    """What the client saw of one intended write: its kind and when it was accepted (monotonic)."""

    write: Write
    kind: str  # "raw" or "conversation"
    key: str  # the Idempotency-Key of its conversation write
    accepted_at: float | None = None


@dataclass
class Seen(TaskState):
    """A task's state plus every status a poll saw, in order, and when one first saw it completed."""

    statuses: list[str] = field(default_factory=list)
    retries: list[dict[str, Any]] = field(default_factory=list)  # the distinct `retry` objects seen
    accepted_at: float | None = None
    completed_at: float | None = None


def make_tracks(n: int, users: list[str], tag: str, share: float, rng: random.Random) -> list[Track]:
    """`n` unique writes over `users`: chaos.py's raw writes, about `share` of them turned into conversation writes
    (one first-person user message each)."""
    tracks: list[Track] = []
    for w in make_writes(n, users, f"starve {tag}", rng):
        if rng.random() < share:
            p1, p2 = rng.sample(PEOPLE, 2)
            tool, tool2 = rng.sample(TOOLS, 2)
            text = rng.choice(CONVERSATIONS).format(
                p1=p1, p2=p2, tool=tool, tool2=tool2, place=rng.choice(PLACES), company=rng.choice(COMPANIES),
                project=rng.choice(PROJECTS))
            w.content, w.category = f"{text} (note {tag} #{w.index})", "conversation"
            tracks.append(Track(w, "conversation", f"starve-{tag}-{w.index}"))
        else:
            tracks.append(Track(w, "raw", f"starve-{tag}-{w.index}"))
    return tracks


async def submit_conversation(client: httpx.AsyncClient, t: Track, retry_s: float, rng: random.Random) -> None:
    """chaos.submit for a conversation write (the same Idempotency-Key on every resend)."""
    body = {"messages": [{"role": "user", "content": t.write.content}], "user_id": t.write.user}
    await submit(client, t.write, retry_s, rng, path="/v1/memories", body=body, headers={"Idempotency-Key": t.key})


@dataclass
class Live:
    """One row's run: the writes, the tasks as polled, /health's samples and what the fault did."""

    run: Run
    tracks: list[Track]
    seen: dict[str, Seen] = field(default_factory=dict)
    stream_started: float = 0.0  # monotonic
    stream_deadline: float = 0.0
    health: list[dict[str, Any]] = field(default_factory=list)  # /health's write_path.loops entries, all samples
    health_samples: int = 0
    health_degraded: int = 0
    health_errors: int = 0
    fault_notes: list[str] = field(default_factory=list)
    conv_memories: int = 0  # memories the completed conversation writes reported, and those not listed
    conv_missing_qdrant: int = 0
    conv_missing_graph: int = 0


async def stream(client: httpx.AsyncClient, live: Live, args: argparse.Namespace, rate: float) -> None:
    todo = iter(live.tracks)
    next_slot = time.monotonic()

    async def client_loop(i: int) -> None:
        nonlocal next_slot
        rng = random.Random(args.seed * 7919 + i)
        for t in todo:  # shared iterator: each write is taken by one client
            now = time.monotonic()
            if now >= live.stream_deadline:
                return
            if rate > 0:  # pace the stream: one slot every 1/rate s, no catch-up burst after a stall
                wait, next_slot = max(0.0, next_slot - now), max(next_slot, now) + 1 / rate
                await asyncio.sleep(wait)
            if t.kind == "raw":
                await submit(client, t.write, args.write_retry_s, rng)
            else:
                await submit_conversation(client, t, args.write_retry_s, rng)
            if t.write.task_id is not None:
                t.accepted_at = time.monotonic()
                live.run.accepted += 1
                ts = live.seen.setdefault(t.write.task_id, Seen(t.write.task_id))
                live.run.tasks[ts.task_id] = ts
                if ts.accepted_at is None:
                    ts.accepted_at = t.accepted_at

    try:
        await asyncio.gather(*(client_loop(i) for i in range(args.c)))
    finally:
        live.run.stream_done = True


async def poller(client: httpx.AsyncClient, live: Live, limit_s: float) -> None:
    """Polls every accepted task not ended, a round at most every POLL_INTERVAL, until the stream is done and every
    task ended, or `limit_s` after the stream."""
    sem = asyncio.Semaphore(POLL_CONCURRENCY)

    async def poll(ts: Seen) -> None:
        async with sem:
            try:
                resp = await client.get(f"/v1/memories/status/{ts.task_id}")
            except httpx.HTTPError:
                return
        now = time.monotonic()
        if resp.status_code == 404:
            ts.status, ts.error = "failed", "unknown or expired task (404)"
        elif resp.status_code == 200:
            data = resp.json()
            ts.status, ts.result, ts.error = str(data.get("status")), data.get("result"), data.get("error")
            retry = data.get("retry")
            if isinstance(retry, dict) and (not ts.retries or ts.retries[-1] != retry):
                ts.retries.append(retry)
        else:
            return
        if not ts.statuses or ts.statuses[-1] != ts.status:
            ts.statuses.append(ts.status)
        if ts.status == "completed" and ts.completed_at is None:
            ts.completed_at = now
        if ts.status in FINAL and ts.ended_at is None:
            ts.ended_at = now

    t0 = time.monotonic()
    last_print = t0
    stream_end: float | None = None
    cap = STREAM_CAP_S + limit_s
    for _ in range(int(cap / POLL_INTERVAL) + 10):
        now = time.monotonic()
        if live.run.stream_done and stream_end is None:
            stream_end = now
        pending = [ts for ts in live.seen.values() if ts.status not in FINAL]
        if stream_end is not None and (not pending or now - stream_end >= limit_s):
            return
        if now - t0 >= cap:
            return
        round_start = time.monotonic()
        await asyncio.gather(*(poll(ts) for ts in pending))
        left = sum(ts.status not in FINAL for ts in live.seen.values())
        if stream_end is not None and left and time.monotonic() - last_print >= 15:
            last_print = time.monotonic()
            print(f"  [{last_print - stream_end:5.0f}s after the stream] waiting for {left} tasks", flush=True)
        await asyncio.sleep(max(0.0, POLL_INTERVAL - (time.monotonic() - round_start)))


async def health_watch(client: httpx.AsyncClient, live: Live, stop_event: asyncio.Event) -> None:
    """GET /health every HEALTH_INTERVAL until `stop_event`: each process's event-loop figures."""
    for _ in range(int((STREAM_CAP_S * 2) / HEALTH_INTERVAL) + 10):
        if stop_event.is_set():
            return
        try:
            resp = await client.get("/health", timeout=5.0)
            body = resp.json()
        except (httpx.HTTPError, ValueError):
            live.health_errors += 1
        else:
            live.health_samples += 1
            if isinstance(body, dict):
                live.health_degraded += body.get("status") == "degraded"
                write_path = body.get("write_path")
                loops = write_path.get("loops") if isinstance(write_path, dict) else None
                if isinstance(loops, list):
                    live.health += [rec for rec in loops if isinstance(rec, dict)]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop_event.wait(), HEALTH_INTERVAL)


# --------------------------------------------------------------------------------------------
# faults
# --------------------------------------------------------------------------------------------


def descendants(root: int) -> dict[int, str]:
    """Live descendants of `root` from /proc: pid -> command line (spaces between arguments)."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        parents[int(entry)], cmdlines[int(entry)] = int(fields[1]), cmd
    tree: set[int] = {root}
    for _ in range(8):  # bounded: a few levels deep
        grown = tree | {p for p, parent in parents.items() if parent in tree}
        if grown == tree:
            break
        tree = grown
    return {p: cmdlines[p] for p in tree - {root} if p in cmdlines}


def worker_children(service: Service) -> list[int]:
    if service.proc is None or service.proc.poll() is not None:
        return []
    return sorted(p for p, cmd in descendants(service.proc.pid).items() if "worker.child" in cmd)


def ensure_stress_ng() -> str | None:
    """stress-ng's path, installed with apt-get (sudo -n, else as this user) when missing; None when it cannot be."""
    exe = shutil.which("stress-ng")
    if exe:
        return exe
    for cmd in (["sudo", "-n", "apt-get", "install", "-y", "-qq", "stress-ng"],
                ["apt-get", "install", "-y", "-qq", "stress-ng"]):
        if not shutil.which(cmd[0]):
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=STRESS_INSTALL_S,
                           check=False, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        exe = shutil.which("stress-ng")
        if exe:
            return exe
    return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stops stress-ng and the workers it forked (its own process group, started by this bench)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def fault_cpu(live: Live, args: argparse.Namespace) -> None:
    exe = shutil.which("stress-ng")
    assert exe, "stress-ng checked before the stack started"
    n = 3 * (os.cpu_count() or 1)
    proc = subprocess.Popen(  # noqa: ASYNC220 - a quick fork; waited on below without blocking the loop
        [exe, "--cpu", str(n), "--timeout", f"{int(args.fault_s)}s", "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    t0 = time.monotonic()
    try:
        for _ in range(int((args.fault_s + 30) / 0.2) + 1):
            if proc.poll() is not None or time.monotonic() - t0 > args.fault_s + 30:
                break
            await asyncio.sleep(0.2)
    finally:
        await asyncio.to_thread(_kill_group, proc)
        live.fault_notes.append(f"stress-ng --cpu {n} ran {time.monotonic() - t0:.1f}s")


async def fault_redis_pause(live: Live, args: argparse.Namespace, redis_port: int) -> None:
    ms = int(args.fault_s * 1000)
    r = aioredis.Redis(host="127.0.0.1", port=redis_port, socket_timeout=10)
    try:
        paused = r.client_pause(ms, all=True)  # CLIENT PAUSE <ms> ALL
        if inspect.isawaitable(paused):
            await paused
        live.fault_notes.append(f"CLIENT PAUSE {ms} ALL")
        await asyncio.sleep(args.fault_s)  # the pause ends by itself (CLIENT UNPAUSE would wait on it too)
    finally:
        with contextlib.suppress(Exception):
            await r.aclose()


async def fault_neo4j_stop(live: Live, args: argparse.Namespace, neo4j: subprocess.Popen[bytes]) -> None:
    pids = [neo4j.pid, *descendants(neo4j.pid)]  # run.sh execs java: the Popen's pid is the JVM's
    stopped: list[int] = []
    t0 = time.monotonic()
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        await asyncio.sleep(args.fault_s)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        live.fault_notes.append(f"neo4j pids {stopped} stopped {time.monotonic() - t0:.1f}s")


async def fault_worker_kill(live: Live, args: argparse.Namespace, service: Service) -> None:
    half = max(1, len(live.tracks) // 2)
    for _ in range(int(STREAM_CAP_S / 0.05)):  # once half the writes are accepted (mid-stream)
        if live.run.accepted >= half or live.run.stream_done or time.monotonic() >= live.stream_deadline:
            break
        await asyncio.sleep(0.05)
    pids = worker_children(service)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    note = f"SIGKILL worker children {pids} at {live.run.accepted} accepted"
    for _ in range(int(max(args.fault_s, 30) / 0.2) + 1):  # how long until the API started new ones
        new = [p for p in worker_children(service) if p not in pids]
        if new:
            note += f"; new children {new} after {time.monotonic() - t0:.1f}s"
            break
        if time.monotonic() - t0 > max(args.fault_s, 30):
            note += "; no new child seen"
            break
        await asyncio.sleep(0.2)
    live.fault_notes.append(note)


async def inject(fault: str, live: Live, args: argparse.Namespace, service: Service, redis_port: int,
                 neo4j: subprocess.Popen[bytes] | None) -> None:
    if fault == "none":
        return
    await asyncio.sleep(max(0.0, live.stream_started + args.fault_delay - time.monotonic()))
    print(f"  fault {fault} starts ({args.fault_s:g}s)" if fault != "worker-kill" else "  fault worker-kill armed",
          flush=True)
    if fault == "cpu":
        await fault_cpu(live, args)
    elif fault == "redis-pause":
        await fault_redis_pause(live, args, redis_port)
    elif fault == "neo4j-stop" and neo4j is not None:
        await fault_neo4j_stop(live, args, neo4j)
    elif fault == "worker-kill":
        await fault_worker_kill(live, args, service)
    print(f"  fault {fault} over: {'; '.join(live.fault_notes)}", flush=True)


# --------------------------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------------------------


async def check(client: httpx.AsyncClient, live: Live, users: list[str]) -> Checks:
    """chaos.check for both kinds of write: the listing checks (missing, content twice) only for raw writes, whose
    one memory is known; a conversation write is lost only when its task did not complete."""
    c = Checks()
    vec: list[dict[str, Any]] = []
    graph: list[dict[str, Any]] = []
    for user in users:
        vec += await page_all(client, "/v1/memories", user, "memories", {"include_superseded": "true"})
        graph += [m for m in await page_all(client, "/v1/graph/episodes", user, "items")
                  if not m.get("deleted_at") and not m.get("duplicate_of")]
    vec_ids = Counter(str(m["id"]) for m in vec)
    graph_ids = Counter(str(m["id"]) for m in graph)
    c.in_qdrant, c.in_graph = len(vec_ids), len(graph_ids)
    raw_contents = {t.write.content.strip() for t in live.tracks if t.kind == "raw"}
    for name, listed in (("qdrant", vec), ("graph", graph)):
        counter = Counter(s for m in listed if (s := str(m.get("content")).strip()) in raw_contents)
        dups = {k: v for k, v in counter.items() if v > 1}
        setattr(c, f"dup_content_{name}", len(dups))
        c.samples += [f"content x{v} in {name}: {k[:80]}" for k, v in list(dups.items())[:2]]
    c.dup_id_qdrant = sum(1 for v in vec_ids.values() if v > 1)
    c.dup_id_graph = sum(1 for v in graph_ids.values() if v > 1)

    reported: set[str] = set()
    for ts in live.seen.values():
        reported.update(ts.memory_ids())
    c.orphans_qdrant = len(set(vec_ids) - reported)
    c.orphans_graph = len(set(graph_ids) - reported)
    c.stuck = sum(ts.status not in FINAL for ts in live.seen.values())
    c.failed = sum(ts.status == "failed" for ts in live.seen.values())
    c.shared_task_ids = sum(n - 1 for n in Counter(t.write.task_id for t in live.tracks if t.write.task_id).values()
                            if n > 1)

    for t in live.tracks:  # informational: a conversation's memories may be merged or superseded later
        ts_conv = live.seen.get(t.write.task_id or "")
        if t.kind == "conversation" and ts_conv is not None and ts_conv.status == "completed":
            ids = ts_conv.memory_ids()
            live.conv_memories += len(ids)
            live.conv_missing_qdrant += sum(i not in vec_ids for i in ids)
            live.conv_missing_graph += sum(i not in graph_ids for i in ids)
    for t in live.tracks:
        w, why = t.write, None
        if w.task_id is None:
            c.lost_no_task += 1
            why = f"no task id ({w.rejected or f'{w.attempts} attempts'})"
        else:
            ts = live.seen[w.task_id]
            ids = ts.memory_ids()
            if ts.status != "completed" or (t.kind == "raw" and not ids):
                c.lost_not_completed += 1
                why = f"{t.kind} task {w.task_id} {ts.status}: {ts.error}"
            elif t.kind == "raw" and any(i not in vec_ids for i in ids):
                c.lost_missing_qdrant += 1
                why = f"memory {ids[0]} not in qdrant"
            elif t.kind == "raw" and any(i not in graph_ids for i in ids):
                c.lost_missing_graph += 1
                why = f"memory {ids[0]} not in the live graph"
        if why:
            c.lost += 1
            if len(c.samples) < 12:
                c.samples.append(f"lost #{w.index}: {why}")
    return c


# --------------------------------------------------------------------------------------------
# one row
# --------------------------------------------------------------------------------------------


@dataclass
class Row:
    fault: str
    workers: int
    intended: int = 0
    accepted: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    duplicated: int = 0
    stuck: int = 0
    seen_retrying: int = 0
    p50_s: float | None = None
    p99_s: float | None = None
    peak_lag_s: float | None = None
    peak_jobs: int | None = None
    details: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def bad(self) -> bool:
        return self.error is not None or bool(self.failed or self.lost or self.duplicated or self.stuck)


def summarise(row: Row, live: Live, checks: Checks) -> None:
    tasks = live.seen
    row.accepted = sum(t.write.task_id is not None for t in live.tracks)
    row.completed = sum(t.write.task_id is not None and tasks[t.write.task_id].status == "completed"
                        for t in live.tracks)
    row.failed, row.stuck = checks.failed, checks.stuck
    row.lost, row.duplicated = checks.lost, checks.duplicated
    row.seen_retrying = sum("retrying" in ts.statuses for ts in tasks.values())
    lat = [ts.completed_at - ts.accepted_at for ts in tasks.values()
           if ts.completed_at is not None and ts.accepted_at is not None]
    if lat:
        row.p50_s, row.p99_s = pct(lat, 50), pct(lat, 99)
    lags = [float(rec[k]) for rec in live.health for k in ("peak_s", "recent_peak_s")
            if isinstance(rec.get(k), int | float)]
    row.peak_lag_s = max(lags) if lags else None
    jobs = [int(rec["jobs_peak"]) for rec in live.health
            if rec.get("role") == "worker" and isinstance(rec.get("jobs_peak"), int | float)]
    row.peak_jobs = max(jobs) if jobs else None

    kinds = Counter(t.kind for t in live.tracks)
    deps = Counter(str(r.get("dependency")) for ts in tasks.values() for r in ts.retries)
    paths = Counter(" > ".join(ts.statuses) for ts in tasks.values())
    errors = Counter(ts.error for ts in tasks.values() if ts.status == "failed")
    w = [t.write for t in live.tracks]
    row.details += [
        f"writes: {kinds['raw']} raw, {kinds['conversation']} conversation; resent {sum(x.attempts > 1 for x in w)}, "
        f"transport errors {sum(x.transport_errors for x in w)}, 5xx {sum(x.http_5xx for x in w)}, "
        f"rejected {sum(x.rejected is not None for x in w)}",
        f"lost: no task {checks.lost_no_task}, not completed {checks.lost_not_completed}, missing in qdrant "
        f"{checks.lost_missing_qdrant}, missing in graph {checks.lost_missing_graph}; duplicated: content qdrant "
        f"{checks.dup_content_qdrant} graph {checks.dup_content_graph}, id qdrant {checks.dup_id_qdrant} graph "
        f"{checks.dup_id_graph}; shared task ids {checks.shared_task_ids}",
        f"listed: qdrant {checks.in_qdrant}, graph {checks.in_graph}; orphans qdrant {checks.orphans_qdrant}, "
        f"graph {checks.orphans_graph}; conversation memories {live.conv_memories}, not listed (information only): "
        f"qdrant {live.conv_missing_qdrant}, graph {live.conv_missing_graph}",
        f"statuses seen: {dict(paths.most_common(6))}",
        f"retry dependencies: {dict(deps) or '-'}; health samples {live.health_samples} (degraded "
        f"{live.health_degraded}, errors {live.health_errors})",
        f"fault: {'; '.join(live.fault_notes) or '-'}",
    ]
    row.details += [f"failed x{n}: {err}" for err, n in errors.most_common(3)]
    row.details += [f"e.g. {s}" for s in checks.samples[:6]]


async def run_row(args: argparse.Namespace, fault: str, workers: int) -> Row:
    row = Row(fault, workers, intended=args.n)
    tag = uuid.uuid4().hex[:8]
    rng = random.Random(args.seed)
    users = [f"starve-{tag}-u{i}" for i in range(args.users)]
    work = Path(tempfile.mkdtemp(prefix="bench-starve-"))
    tracks = make_tracks(args.n, users, tag, args.conv_share, rng)
    live = Live(Run([t.write for t in tracks]), tracks)
    window = args.fault_delay + args.fault_s + 5
    rate = args.rate if args.rate > 0 else args.n / max(window, 1.0)
    redis_proc: subprocess.Popen[bytes] | None = None
    neo4j_proc: subprocess.Popen[bytes] | None = None
    service: Service | None = None
    print(f"\n=== fault {fault}, workers {workers}: work dir {work}  n={args.n}  c={args.c}  users={args.users}  "
          f"rate={rate:.1f}/s  embedder={args.embedder}  budget={args.budget_s:g}s", flush=True)
    t_row = time.perf_counter()
    try:
        redis_proc, redis_port = await asyncio.to_thread(start_redis_aof, work)
        t0 = time.perf_counter()
        neo4j_proc, neo4j_port = await asyncio.to_thread(start_neo4j, work)
        print(f"redis 127.0.0.1:{redis_port} (AOF)  neo4j bolt://127.0.0.1:{neo4j_port} "
              f"ready in {time.perf_counter() - t0:.0f}s", flush=True)
        port = free_port()
        env = service_env(args, work, redis_port, neo4j_port, port)
        env.update({"WRITE_RETRY_BUDGET_SECONDS": str(args.budget_s), "WORKER_PROCESSES": str(workers),
                    "WORKER_SHARDS": str(workers), "WORKER_PROCESS": "child", "LLM_PROVIDER": "offline"})
        service = Service(args.src, env, port, work / "service.log")
        await asyncio.to_thread(service.start)
        print(f"service 127.0.0.1:{port} up in {service.start_s[-1]:.1f}s", flush=True)

        limits = httpx.Limits(max_connections=args.c + POLL_CONCURRENCY + 8,
                              max_keepalive_connections=args.c + POLL_CONCURRENCY + 8)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0, limits=limits) as client:
            live.stream_started = time.monotonic()
            live.stream_deadline = live.stream_started + min(STREAM_CAP_S, args.n / rate + args.write_retry_s + 60)
            stop_health = asyncio.Event()
            health = asyncio.create_task(health_watch(client, live, stop_health))
            fault_task = asyncio.create_task(inject(fault, live, args, service, redis_port, neo4j_proc))
            try:
                await asyncio.gather(stream(client, live, args, rate), poller(client, live, args.timeout))
                await fault_task  # bounded by --fault-s (or the stream, for worker-kill)
            finally:
                if not fault_task.done():
                    fault_task.cancel()  # its finally undoes the fault (SIGCONT, stress-ng stopped)
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await fault_task
                stop_health.set()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await health
            print(f"stream + settle: {row_accepted(live)}/{args.n} accepted, "
                  f"{sum(ts.status in FINAL for ts in live.seen.values())} ended, in "
                  f"{time.monotonic() - live.stream_started:.1f}s", flush=True)
            checks = await check(client, live, users)
        summarise(row, live, checks)
    except Exception as exc:
        row.error = f"{type(exc).__name__}: {exc}"
        print(f"row failed: {row.error}", flush=True)
        if service is not None:
            print("last lines of the service log:\n" + log_tail(service.log_path), flush=True)
    finally:
        if neo4j_proc is not None:  # never leave it stopped, whatever happened to the fault task
            for pid in [neo4j_proc.pid, *descendants(neo4j_proc.pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
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
    row.details.append(f"row wall time {time.perf_counter() - t_row:.1f}s")
    for line in row.details:
        print(f"  {line}")
    return row


def row_accepted(live: Live) -> int:
    return sum(t.write.task_id is not None for t in live.tracks)


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    def num(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}"

    head = ("fault", "workers", "accepted", "completed", "failed", "lost", "duplicated", "stuck", "seen_retrying",
            "p50 s", "p99 s", "peak lag s", "peak concurrency")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        if r.error is not None:
            cells = [r.fault, str(r.workers), "error: " + r.error[:80].replace("|", "/")] + [""] * (len(head) - 3)
        else:
            cells = [r.fault, str(r.workers), f"{r.accepted}/{r.intended}", str(r.completed), str(r.failed),
                     str(r.lost), str(r.duplicated), str(r.stuck), str(r.seen_retrying), num(r.p50_s),
                     num(r.p99_s), num(r.peak_lag_s), "n/a" if r.peak_jobs is None else str(r.peak_jobs)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> int:
    faults = list(FAULTS) if args.fault == "all" else [args.fault]
    if "cpu" in faults and await asyncio.to_thread(ensure_stress_ng) is None:
        print("stress-ng is needed for --fault cpu: apt-get install stress-ng", file=sys.stderr)
        return 2
    rows: list[Row] = []
    for fault in faults:
        for workers in args.workers:
            rows.append(await run_row(args, fault, workers))
    text = table(rows)
    print("\n--- starve summary ---\n" + text, flush=True)
    bad = [f"{r.fault}/{r.workers}" for r in rows if r.bad]
    print(f"\nresult: {'FAIL ' + ', '.join(bad) if bad else 'OK'}")
    if args.smoke:
        ok = (len(rows) == 1 and "| redis-pause | 1 |" in text and rows[0].error is None
              and rows[0].failed == 0 and rows[0].lost == 0 and rows[0].accepted == args.n)
        print(f"smoke: {'OK' if ok else 'FAIL'}")
        if not ok:
            return 1
    return 1 if bad else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fault", choices=(*FAULTS, "all"), default="all", help="the fault (all: each in turn)")
    p.add_argument("--fault-s", type=float, default=60.0, help="how long the fault lasts (seconds)")
    p.add_argument("--fault-delay", type=float, default=3.0, help="seconds after the stream starts the fault begins")
    p.add_argument("-n", type=int, default=300, help="writes in all (raw and conversation)")
    p.add_argument("-c", type=int, default=4, help="concurrent clients")
    p.add_argument("--users", type=int, default=4, help="users the writes are spread over")
    p.add_argument("--workers", default="1", help="WORKER_PROCESSES (= WORKER_SHARDS), a comma list: a row each")
    p.add_argument("--rate", type=float, default=0.0,
                   help="writes per second in all (0 = spread over fault delay + fault + 5 s)")
    p.add_argument("--conv-share", type=float, default=0.5, help="share of conversation writes (0-1)")
    p.add_argument("--budget-s", type=float, default=900.0, help="WRITE_RETRY_BUDGET_SECONDS of the service")
    p.add_argument("--embedder", choices=("hash", "local"), default="hash", help="EMBEDDER of the service")
    p.add_argument("--job-timeout", type=int, default=300, help="ARQ_JOB_TIMEOUT of the service (seconds)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds after the stream to wait for every task")
    p.add_argument("--write-retry-s", type=float, default=600.0, help="how long one write is resent at most")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the temp dirs (logs and data)")
    p.add_argument("--src", default=str(ROOT), help="checkout the service runs from (default: this one), e.g. a "
                                                     "`git worktree` of an older commit, for a before/after")
    p.add_argument("--smoke", action="store_true",
                   help="a short check: redis-pause 3 s, 12 writes, 2 users, 1 worker, --timeout 120")
    args = p.parse_args(argv)
    args.src = Path(args.src).resolve()
    if not (args.src / "service" / "__main__.py").is_file():
        p.error(f"--src {args.src}: not a checkout of this repository (no service/__main__.py)")
    if args.smoke:
        args.fault, args.fault_s, args.n, args.users, args.workers, args.timeout = "redis-pause", 3.0, 12, 2, "1", 120.0
    try:
        args.workers = [int(x) for x in str(args.workers).split(",") if x.strip()]
    except ValueError:
        p.error(f"--workers {args.workers!r}: a comma list of integers, e.g. 1,2,4")
    if not args.workers or any(not 1 <= w <= 16 for w in args.workers):
        p.error("--workers: each between 1 and 16")
    if (args.n < 1 or args.c < 1 or args.users < 1 or args.timeout <= 0 or args.job_timeout < 1 or args.fault_s < 0
            or args.fault_delay < 0 or args.budget_s < 1 or args.write_retry_s <= 0 or not 0 <= args.conv_share <= 1):
        p.error("-n, -c, --users, --job-timeout, --budget-s must be >= 1; --timeout, --write-retry-s > 0; "
                "--fault-s, --fault-delay >= 0; --conv-share in 0-1")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
