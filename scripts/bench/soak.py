"""Soak benchmark: a long mixed write load with updates, deletes and searches, then a consistency check.

Targets a running stack by URL and starts nothing:

    .venv/bin/python scripts/bench/soak.py --url http://127.0.0.1:8199 [-n 5000] [-c 32] [-u 3] \
        [--timeout 900] [--seed 1] [--api-key KEY]

What it does (every loop is bounded in count and in time):

1. Writes. `-n` writes from `-c` concurrent clients for `-u` users named `soak-<runtag>-u<i>` (user 0
   takes half of the writes, the others split the rest evenly). ~75% are `POST /v1/memories/raw`
   (categories preference, personal_fact, technical_skill, domain_knowledge, decision, interaction),
   ~10% `POST /v1/memories/raw/batch` with 2-5 of those facts, ~15% `POST /v1/memories` conversations of
   2-4 user sentences. With `--max-pending N`, a client holds its next write while N tasks are pending (a
   closed loop: on a slow machine the queue stays short instead of outliving TASK_TTL_SECONDS). With `--rate R`,
   writes start at most R a second over all clients (an open loop: the rate stays the same while the machine's
   load changes, as long as R is below what the stack can take; a client that falls behind does not catch up in a
   burst). Every text is
   built from templates over a small shared pool (10 people, 5 places, 8 tools), so concurrent jobs contend on the same
   graph entities; a counter makes each request unique, so idempotency never merges two of them.
2. Mixed in: when a write task completes, each of its memories is, with probability 3%, updated
   (`PUT /v1/memories/{id}`) and, with another 3%, deleted (`DELETE /v1/memories/{id}?user_id=`);
   about one request in ten is a `POST /v1/search`. Non-2xx answers are counted per route.
3. Every task is polled at `/v1/memories/status/{task_id}` (oldest first, with a per-task back-off
   of 0.2-1 s, so polls stay light: the embedded worker shares the API's event loop) until it ends
   or `--timeout` seconds have passed since the last write was accepted. Latencies: accept (the
   HTTP call) and accepted-to-completed (to the poll that saw the task end, so +<=1 s resolution).
   `GET /health` is read every second: the peak of `write_path.outbox_depth` and the change in
   `write_path.deadlock_retries` are reported when the service exposes them ("n/a" otherwise).
4. Consistency per user: expected live ids = memory ids of completed write and update tasks minus
   the `deleted` ids of completed delete tasks; compared with every id listed by
   `GET /v1/memories?user_id=&include_superseded=true` (no scope and no project_id: every scope; a superseded
   memory is history, not lost) and with the live
   `(:Memory)` episodes of `GET /v1/graph/episodes?user_id=` (no `deleted_at`, no `duplicate_of`).
   unexpected = ids listed that no task reported; deleted_in_* = ids a completed delete
   reported deleted that are still listed.

5. Beside the figures: memories stored per second (first accept to last completion) and the raw local
   embedder's texts/s on the stored texts, measured in this process after the run (`--embedder`; `none`
   skips it), and their ratio: the worker's share of what the embedder alone could do.

6. With `--cleanup`, after the check: `POST /v1/memories/delete {"user_id", "all": true}` for each user, polled
   until it ends, and the users' listing must then be empty. Rounds of a soak with `--cleanup` against a
   service with a short TASK_TTL_SECONDS keep the stored data constant, so the RSS of every process can be
   compared from round to round (`footprint.py --soak-constant`).

A dedup sweep (DEDUP_CRON_HOURS) running during the soak would remove memories on purpose; run the
target with DEDUP_CRON_ENABLED=false for clean figures.

`--smoke` (no other argument needed): starts its own `python -m service` on the test stack (TEST_REDIS_URL,
TEST_NEO4J_URI, TEST_NEO4J_DATABASE; hash embedder, a queue of its own, DEDUP_CRON_ENABLED=false;
scripts/bench/procs.py), runs -n 24 -c 4 -u 2 --timeout 60 --cleanup --embedder hash against it, stops it, then prints
`smoke: OK` when the run's result is OK, every write was accepted and completed and the rate is > 0, else
`smoke: FAIL` (exit status 1).

Exit status: 1 when a task is stuck (not completed/failed at the end), a cleanup failed or left memories
listed, a consistency count is not zero, any route answered 5xx (`/health` included), a request failed
at the transport level three times in a row (a single failure, e.g. a keep-alive connection the server
just closed, is resent and counted as "retried": every request here is idempotent), or no write was accepted; else 0.
Failed tasks are reported but do not by themselves fail the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `scripts.bench.common` importable when run as a script

from scripts.bench.common import (  # noqa: E402
    HTTP_ERRORS,
    PEOPLE,
    PLACES,
    RAW_CATEGORIES,
    TOOLS,
    Answer,
    embedder_rate,
    fetch_retrying,
    pct,
)
from scripts.bench.procs import smoke_against_service  # noqa: E402

RAW_TEMPLATES = (
    "{p1} met {p2} in {place} to talk about {tool}",
    "{p1} prefers {tool} over {tool2} for side projects",
    "{p1} lives in {place} and works with {p2}",
    "{p1} knows {tool} well and teaches it to {p2}",
    "Decided with {p1} to use {tool} for the {place} office",
    "{p1} and {p2} deployed {tool} in {place}",
    "I use {tool} with {p1} every week",
    "{p1} works at the {place} office on {tool}",
    # roles (docs/identity.md, Meanings): one pool name with two roles is two entities and a pending pair
    "I work with {p1}, the {role}, on {tool}",
    "My {role} {p1} moved to {place}",
)
ROLES = ("plumber", "dentist", "team lead", "accountant", "soccer coach")
CONV_SENTENCES = (
    "I live in {place}.",
    "I use {tool} for my projects.",
    "My colleague {p1} prefers {tool2}.",
    "I met {p1} in {place} last week.",
    "I work with {p2} on {tool}.",
    "I prefer {tool} over {tool2}.",
    "I moved to {place} to work with {p1}.",
)
QUERY_TEMPLATES = ("{p1}", "{tool}", "who lives in {place}", "what does {p1} prefer", "{p1} {tool} {place}")

CONVERSATION_SHARE = 0.15
BATCH_SHARE = 0.10  # of the writes: 2-5 raw facts in one POST /v1/memories/raw/batch
UPDATE_SHARE = 0.03
DELETE_SHARE = 0.03
SEARCH_SHARE = 0.10  # of all requests (writes, updates, deletes and searches)
POLL_INTERVAL = 0.2  # seconds between poll rounds
POLL_BACKOFF_MAX = 1.0  # at most this long between two polls of one task
HEALTH_INTERVAL = 1.0
TRANSPORT_ATTEMPTS = 3  # a request failing at the transport level is sent again, twice at most
PAGE_LIMIT = 500
MAX_PAGES = 10_000
WRITE_KINDS = ("raw", "raw_batch", "conversation")
FINAL = ("completed", "failed")

ROUTE_RAW = "POST /v1/memories/raw"
ROUTE_BATCH = "POST /v1/memories/raw/batch"
ROUTE_CONV = "POST /v1/memories"
ROUTE_UPDATE = "PUT /v1/memories/{id}"
ROUTE_DELETE = "DELETE /v1/memories/{id}"
ROUTE_SEARCH = "POST /v1/search"
ROUTE_STATUS = "GET /v1/memories/status/{id}"
ROUTE_LIST = "GET /v1/memories"
ROUTE_EPISODES = "GET /v1/graph/episodes"
ROUTE_HEALTH = "GET /health"
ROUTE_BULK_DELETE = "POST /v1/memories/delete"
CLEANUP_TIMEOUT = 600.0  # seconds a user's cleanup may take




# --------------------------------------------------------------------------------------------
# workload
# --------------------------------------------------------------------------------------------


def pool_values(rng: random.Random) -> dict[str, str]:
    p1, p2 = rng.sample(PEOPLE, 2)
    tool, tool2 = rng.sample(TOOLS, 2)
    return {"p1": p1, "p2": p2, "tool": tool, "tool2": tool2, "place": rng.choice(PLACES), "role": rng.choice(ROLES)}


@dataclass
class WriteOp:
    index: int
    user: str
    kind: str  # raw | raw_batch | conversation
    body: dict[str, Any]


@dataclass
class MutationOp:
    kind: str  # update | delete
    user: str
    memory_id: str
    body: dict[str, Any] | None = None


def user_ids(tag: str, users: int) -> list[str]:
    return [f"soak-{tag}-u{i}" for i in range(users)]


def split_counts(n: int, users: int) -> list[int]:
    """User 0 takes half of the writes (all of them when alone); the others split the rest evenly."""
    if users == 1:
        return [n]
    first = n // 2
    rest = n - first
    base, extra = divmod(rest, users - 1)
    return [first] + [base + (1 if i < extra else 0) for i in range(users - 1)]


def make_writes(n: int, users: list[str], tag: str, rng: random.Random) -> list[WriteOp]:
    owners = [u for u, k in zip(users, split_counts(n, len(users)), strict=True) for _ in range(k)]
    rng.shuffle(owners)
    ops: list[WriteOp] = []
    for i, user in enumerate(owners):
        marker = f"(soak {tag} #{i})"
        if rng.random() < CONVERSATION_SHARE:
            k = rng.randint(2, 4)
            sentences = [s.format(**pool_values(rng)) for s in rng.sample(CONV_SENTENCES, k)]
            body: dict[str, Any] = {
                "messages": [
                    {"role": "user", "content": " ".join(sentences)},
                    {"role": "assistant", "content": f"Noted, thanks {marker}."},
                ],
                "user_id": user,
            }
            ops.append(WriteOp(i, user, "conversation", body))
        elif rng.random() < BATCH_SHARE / (1 - CONVERSATION_SHARE):
            items = [{"content": rng.choice(RAW_TEMPLATES).format(**pool_values(rng)) + f" {marker}.{j}",
                      "category": rng.choice(RAW_CATEGORIES)} for j in range(rng.randint(2, 5))]
            ops.append(WriteOp(i, user, "raw_batch", {"user_id": user, "memories": items}))
        else:
            text = rng.choice(RAW_TEMPLATES).format(**pool_values(rng)) + f" {marker}"
            body = {"content": text, "user_id": user, "category": rng.choice(RAW_CATEGORIES)}
            ops.append(WriteOp(i, user, "raw", body))
    return ops


# --------------------------------------------------------------------------------------------
# state
# --------------------------------------------------------------------------------------------


@dataclass
class Task:
    task_id: str
    kind: str  # raw | raw_batch | conversation | update | delete
    user: str
    accepted: float  # perf_counter when the 202 arrived
    accept_ms: float
    target: str | None = None  # the memory id of an update or delete
    status: str = "queued"
    done_at: float | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    polls: int = 0
    next_poll: float = 0.0

    @property
    def ended(self) -> bool:
        return self.status in FINAL

    def memory_ids(self) -> list[str]:
        if not self.result:
            return []
        return [str(m["id"]) for m in self.result.get("memories") or [] if isinstance(m, dict) and "id" in m]

    def deleted_ids(self) -> list[str]:
        if not self.result:
            return []
        return [str(x) for x in self.result.get("deleted") or []]


@dataclass
class Health:
    samples: int = 0
    outbox_peak: int | None = None
    deadlock_start: int | None = None
    deadlock_end: int | None = None
    last_checks: dict[str, Any] = field(default_factory=dict)

    def observe(self, body: dict[str, Any]) -> int | None:
        """Records the outbox depth; returns deadlock_retries when the body has it."""
        self.samples += 1
        self.last_checks = body.get("checks") or {}
        wp = body.get("write_path")
        if not isinstance(wp, dict):
            return None
        depth = wp.get("outbox_depth")
        if isinstance(depth, int | float):
            self.outbox_peak = int(depth) if self.outbox_peak is None else max(self.outbox_peak, int(depth))
        retries = wp.get("deadlock_retries")
        return int(retries) if isinstance(retries, int | float) else None


@dataclass
class State:
    tasks: dict[str, Task] = field(default_factory=dict)
    pending: dict[str, Task] = field(default_factory=dict)  # insertion order = acceptance order
    writes: Iterator[WriteOp] = field(default_factory=lambda: iter(()))
    writes_exhausted: bool = False
    last_write_accepted: float | None = None
    mutations: list[MutationOp] = field(default_factory=list)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)  # after TRANSPORT_ATTEMPTS tries
    transport_retries: Counter[str] = field(default_factory=Counter)
    transport_samples: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # first non-2xx bodies
    duplicate_task_ids: int = 0
    searches: int = 0
    search_degraded: int = 0
    write_requests: int = 0
    clients_done: bool = False
    polling_done: bool = False
    health: Health = field(default_factory=Health)
    next_write_at: float = 0.0  # --rate: the monotonic time the next write may start

    def count(self, route: str, status: int) -> None:
        self.statuses[(route, status)] += 1

    def transport(self, route: str, exc: Exception) -> None:
        self.transport_errors[route] += 1
        if len(self.transport_samples) < 5:
            self.transport_samples.append(f"{route}: {type(exc).__name__}: {str(exc)[:200]}")

    def add_task(self, task: Task) -> None:
        if task.task_id in self.tasks:
            self.duplicate_task_ids += 1  # idempotency merged two distinct requests: should not happen
            return
        self.tasks[task.task_id] = task
        self.pending[task.task_id] = task

    def writes_pending(self) -> bool:
        return any(t.kind in WRITE_KINDS for t in self.pending.values())


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------


async def call(
    state: State, client: aiohttp.ClientSession, route: str, method: str, path: str, **kw: Any
) -> Answer | None:
    def resent() -> None:
        state.transport_retries[route] += 1

    try:
        # A pooled keep-alive connection the server closed meanwhile: resent (every call here is idempotent:
        # writes by content, reads).
        resp = await fetch_retrying(
            client, method, path, tries=TRANSPORT_ATTEMPTS, pause_s=lambda attempt: 0.1 * (attempt + 1),
            retry_errors=(aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, aiohttp.ClientPayloadError),
            on_retry=resent, **kw)
    except HTTP_ERRORS as exc:
        state.transport(route, exc)
        return None
    state.count(route, resp.status_code)
    if resp.status_code >= 300 and route != ROUTE_HEALTH and len(state.rejected) < 5:
        state.rejected.append(f"{route} -> {resp.status_code}: {resp.text[:200]}")
    return resp


async def accept(
    state: State, client: aiohttp.ClientSession, route: str, method: str, path: str, kind: str, user: str,
    body: dict[str, Any], target: str | None = None,
) -> Task | None:
    t0 = time.perf_counter()
    resp = await call(state, client, route, method, path, json=body)
    t1 = time.perf_counter()
    if resp is None or resp.status_code != 202:
        return None
    try:
        task_id = str(resp.json()["task_id"])
    except (ValueError, KeyError, TypeError):
        state.rejected.append(f"{route} -> 202 without task_id: {resp.text[:200]}")
        return None
    task = Task(task_id, kind, user, t1, (t1 - t0) * 1000, target=target, next_poll=t1 + POLL_INTERVAL)
    state.add_task(task)
    return task


async def do_write(state: State, client: aiohttp.ClientSession, op: WriteOp) -> None:
    state.write_requests += 1
    if op.kind == "raw":
        await accept(state, client, ROUTE_RAW, "POST", "/v1/memories/raw", "raw", op.user, op.body)
    elif op.kind == "raw_batch":
        await accept(state, client, ROUTE_BATCH, "POST", "/v1/memories/raw/batch", "raw_batch", op.user, op.body)
    else:
        await accept(state, client, ROUTE_CONV, "POST", "/v1/memories", "conversation", op.user, op.body)
    state.last_write_accepted = time.perf_counter()


async def do_mutation(state: State, client: aiohttp.ClientSession, op: MutationOp) -> None:
    if op.kind == "update":
        assert op.body is not None
        await accept(state, client, ROUTE_UPDATE, "PUT", f"/v1/memories/{op.memory_id}", "update", op.user,
                     op.body, target=op.memory_id)
        return
    t0 = time.perf_counter()
    resp = await call(state, client, ROUTE_DELETE, "DELETE", f"/v1/memories/{op.memory_id}",
                      params={"user_id": op.user})
    t1 = time.perf_counter()
    if resp is not None and resp.status_code == 202:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            task = Task(str(resp.json()["task_id"]), "delete", op.user, t1, (t1 - t0) * 1000,
                        target=op.memory_id, next_poll=t1 + POLL_INTERVAL)
            state.add_task(task)


async def do_search(state: State, client: aiohttp.ClientSession, user: str, rng: random.Random) -> None:
    body = {"query": rng.choice(QUERY_TEMPLATES).format(**pool_values(rng)), "user_id": user, "limit": 10}
    resp = await call(state, client, ROUTE_SEARCH, "POST", "/v1/search", json=body)
    state.searches += 1
    if resp is not None and resp.status_code == 200:
        with contextlib.suppress(ValueError, AttributeError):
            state.search_degraded += int(bool(resp.json().get("degraded")))


# --------------------------------------------------------------------------------------------
# loops
# --------------------------------------------------------------------------------------------


async def paced(state: State, rate: float) -> None:
    """Waits for the next write slot of `rate` writes a second (shared by every client); a slot missed is
    dropped, not made up later, so the rate never rises above `rate`."""
    if rate <= 0:
        return
    now = time.monotonic()
    slot = max(now, state.next_write_at)
    state.next_write_at = slot + 1.0 / rate
    if slot > now:
        await asyncio.sleep(slot - now)


async def client_loop(
    state: State, client: aiohttp.ClientSession, rng: random.Random, users: list[str], deadline: float, max_iter: int,
    max_pending: int = 0, rate: float = 0.0,
) -> None:
    """Takes a pending update/delete first, else the next write (held back while `max_pending` tasks, if set, are
    pending); after each request, a search with probability SEARCH_SHARE/(1-SEARCH_SHARE). Returns when the
    writes are exhausted and no write task can still produce an update or delete (or at the deadline)."""
    search_p = SEARCH_SHARE / (1 - SEARCH_SHARE)
    for _ in range(max_iter):
        if time.monotonic() >= deadline or state.polling_done:
            return
        if state.mutations:
            mutation = state.mutations.pop(0)
            await do_mutation(state, client, mutation)
            user = mutation.user
        else:
            if max_pending and len(state.pending) >= max_pending:
                await asyncio.sleep(0.05)
                continue
            op = None if state.writes_exhausted else next(state.writes, None)
            if op is None:
                state.writes_exhausted = True
                if not state.writes_pending():
                    return
                await asyncio.sleep(0.05)
                continue
            await paced(state, rate)
            await do_write(state, client, op)
            user = op.user
        if rng.random() < search_p:
            await do_search(state, client, user if rng.random() < 0.8 else rng.choice(users), rng)


async def poll_task(state: State, client: aiohttp.ClientSession, sem: asyncio.Semaphore, task: Task,
                    mut_rng: random.Random, tag: str, mutate: bool = True) -> None:
    async with sem:
        resp = await call(state, client, ROUTE_STATUS, "GET", f"/v1/memories/status/{task.task_id}")
    now = time.perf_counter()
    task.polls += 1
    task.next_poll = now + min(POLL_BACKOFF_MAX, POLL_INTERVAL * 2 ** min(task.polls - 1, 4))
    if resp is None:
        return
    if resp.status_code == 404:
        task.status, task.error, task.done_at = "failed", "unknown or expired task (404)", now
    elif resp.status_code != 200:
        return
    else:
        try:
            data = resp.json()
        except ValueError:
            return
        task.status = str(data.get("status"))
        if not task.ended:
            return
        task.done_at, task.result, task.error = now, data.get("result"), data.get("error")
    state.pending.pop(task.task_id, None)
    if mutate and task.status == "completed" and task.kind in WRITE_KINDS:
        for mid in task.memory_ids():
            r = mut_rng.random()
            if r < UPDATE_SHARE:
                text = rng_text(mut_rng) + f" (soak {tag} update of {mid[:8]})"
                state.mutations.append(MutationOp("update", task.user, mid, {"content": text, "user_id": task.user}))
            elif r < UPDATE_SHARE + DELETE_SHARE:
                state.mutations.append(MutationOp("delete", task.user, mid))


def rng_text(rng: random.Random) -> str:
    return rng.choice(RAW_TEMPLATES).format(**pool_values(rng))


async def poll_loop(state: State, client: aiohttp.ClientSession, args: argparse.Namespace, mut_rng: random.Random,
                    tag: str, hard_deadline: float) -> None:
    """Polls due tasks, oldest first, at most 2*c per round; ends when every task has ended and the
    clients are done, or `--timeout` after the last accepted write (or at the hard deadline)."""
    sem = asyncio.Semaphore(max(4, min(args.c, 32)))
    cap = max(16, 2 * args.c)
    max_rounds = int((hard_deadline - time.monotonic()) / POLL_INTERVAL) + 100
    try:
        await _poll_rounds(state, client, args, mut_rng, tag, hard_deadline, sem, cap, max_rounds)
    finally:
        state.polling_done = True


async def _poll_rounds(state: State, client: aiohttp.ClientSession, args: argparse.Namespace, mut_rng: random.Random,
                       tag: str, hard_deadline: float, sem: asyncio.Semaphore, cap: int, max_rounds: int) -> None:
    for _ in range(max_rounds):
        now_m = time.monotonic()
        if state.clients_done and not state.pending:
            return
        if now_m >= hard_deadline:
            return
        if state.last_write_accepted is not None and state.writes_exhausted:
            waited = time.perf_counter() - state.last_write_accepted
            if waited >= args.timeout:
                return
        now = time.perf_counter()
        due = [t for t in list(state.pending.values()) if t.next_poll <= now][:cap]
        if due:
            await asyncio.gather(*(poll_task(state, client, sem, t, mut_rng, tag) for t in due))
        await asyncio.sleep(POLL_INTERVAL)


async def health_loop(state: State, client: aiohttp.ClientSession, stop: asyncio.Event, max_samples: int) -> None:
    for _ in range(max_samples):
        if stop.is_set():
            return
        resp = await call(state, client, ROUTE_HEALTH, "GET", "/health")
        if resp is not None:
            with contextlib.suppress(ValueError, AttributeError):
                state.health.observe(resp.json())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), HEALTH_INTERVAL)


async def read_health(state: State, client: aiohttp.ClientSession) -> tuple[int | None, dict[str, Any] | None]:
    resp = await call(state, client, ROUTE_HEALTH, "GET", "/health")
    if resp is None:
        return None, None
    try:
        body: dict[str, Any] = resp.json()
    except ValueError:
        return None, None
    return state.health.observe(body), body


# --------------------------------------------------------------------------------------------
# final checks
# --------------------------------------------------------------------------------------------


async def page_all(state: State, client: aiohttp.ClientSession, route: str, path: str, user: str,
                   key: str) -> tuple[list[dict[str, Any]], str | None]:
    """Every item of a cursor-paged listing; (items, error) - error when a page failed."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        # a memory a later statement superseded is history, not lost: the memory listing includes it
        params: dict[str, Any] = {"user_id": user, "limit": PAGE_LIMIT,
                                  **({"include_superseded": "true"} if path == "/v1/memories" else {})}
        if cursor:
            params["cursor"] = cursor
        resp = await call(state, client, route, "GET", path, params=params)
        if resp is None:
            return items, f"{route}: transport error"
        if resp.status_code != 200:
            return items, f"{route}: HTTP {resp.status_code}: {resp.text[:200]}"
        body = resp.json()
        items += list(body.get(key) or [])
        cursor = body.get("next_cursor")
        if not cursor:
            return items, None
    return items, f"{route}: more than {MAX_PAGES} pages"


@dataclass
class UserCheck:
    user: str
    tasks: int = 0
    stuck: int = 0
    failed: int = 0
    expected: int = 0
    in_qdrant: int = 0
    in_graph: int = 0
    missing_in_qdrant: int = 0
    missing_in_graph: int = 0
    unexpected_in_qdrant: int = 0
    unexpected_in_graph: int = 0
    deleted_in_qdrant: int = 0  # reported deleted by a completed delete, still listed
    deleted_in_graph: int = 0
    listing_errors: list[str] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)

    def mismatches(self) -> int:
        return (self.missing_in_qdrant + self.missing_in_graph + self.unexpected_in_qdrant
                + self.unexpected_in_graph + self.deleted_in_qdrant + self.deleted_in_graph)


async def check_user(state: State, client: aiohttp.ClientSession, user: str) -> UserCheck:
    out = UserCheck(user)
    tasks = [t for t in state.tasks.values() if t.user == user]
    out.tasks = len(tasks)
    out.stuck = sum(not t.ended for t in tasks)
    out.failed = sum(t.status == "failed" for t in tasks)
    written: set[str] = set()
    deleted: set[str] = set()
    for t in tasks:
        if t.status != "completed":
            continue
        if t.kind == "delete":
            deleted.update(t.deleted_ids())
        else:
            written.update(t.memory_ids())
    reported = written | deleted
    expected = written - deleted

    vec_items, err = await page_all(state, client, ROUTE_LIST, "/v1/memories", user, "memories")
    if err:
        out.listing_errors.append(err)
    graph_items, err = await page_all(state, client, ROUTE_EPISODES, "/v1/graph/episodes", user, "items")
    if err:
        out.listing_errors.append(err)
    in_qdrant = {str(m["id"]) for m in vec_items}
    in_graph = {str(m["id"]) for m in graph_items if not m.get("deleted_at") and not m.get("duplicate_of")}

    out.expected, out.in_qdrant, out.in_graph = len(expected), len(in_qdrant), len(in_graph)
    missing_q, missing_g = expected - in_qdrant, expected - in_graph
    unexp_q, unexp_g = in_qdrant - reported, in_graph - reported
    del_q, del_g = in_qdrant & deleted, in_graph & deleted
    out.missing_in_qdrant, out.missing_in_graph = len(missing_q), len(missing_g)
    out.unexpected_in_qdrant, out.unexpected_in_graph = len(unexp_q), len(unexp_g)
    out.deleted_in_qdrant, out.deleted_in_graph = len(del_q), len(del_g)
    for name, ids in (("missing_in_qdrant", missing_q), ("missing_in_graph", missing_g),
                      ("unexpected_in_qdrant", unexp_q), ("unexpected_in_graph", unexp_g),
                      ("deleted_in_qdrant", del_q), ("deleted_in_graph", del_g)):
        out.samples += [f"{name}: {i}" for i in sorted(ids)[:2]]
    return out


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------


async def cleanup_user(state: State, client: aiohttp.ClientSession, user: str) -> list[str]:
    """Delete all of `user`'s memories through the queue; errors as text (none when the listing ends empty)."""
    task = await accept(state, client, ROUTE_BULK_DELETE, "POST", "/v1/memories/delete", "bulk_delete", user,
                        {"user_id": user, "all": True})
    if task is None:
        return [f"{user}: bulk delete not accepted"]
    state.pending.pop(task.task_id, None)
    deadline = time.monotonic() + CLEANUP_TIMEOUT
    while not task.ended and time.monotonic() < deadline:
        await asyncio.sleep(POLL_INTERVAL)
        await poll_task(state, client, asyncio.Semaphore(1), task, random.Random(0), "", mutate=False)
    if task.status != "completed":
        return [f"{user}: bulk delete ended {task.status} ({task.error})"]
    left, err = await page_all(state, client, ROUTE_LIST, "/v1/memories", user, "memories")
    return ([err] if err else []) + ([f"{user}: {len(left)} memories still listed after the cleanup"] if left else [])


def fmt(v: int | None) -> str:
    return "n/a" if v is None else str(v)


async def print_embedder_ratio(state: State, kind: str) -> None:
    """Memories stored per second beside the raw embedder's texts/s on the texts that were stored (this process,
    after the run): the worker's share of what the embedder alone could do."""
    done = [t for t in state.tasks.values() if t.kind in WRITE_KINDS and t.status == "completed" and t.done_at]
    stored = [m for t in done for m in (t.result or {}).get("memories") or [] if isinstance(m, dict)]
    texts = [str(m.get("content") or "") for m in stored][:512]
    first = min((t.accepted for t in state.tasks.values() if t.kind in WRITE_KINDS), default=None)
    last = max((t.done_at for t in done if t.done_at is not None), default=None)
    if not texts or first is None or last is None or last <= first:
        return
    rate = len(stored) / (last - first)
    name, emb, _ = await embedder_rate(kind, texts)
    print(f"memories stored/s {rate:.1f}  embedder {name} {emb:.1f} texts/s (batches of 64, this process, after "
          f"the run)  worker / embedder {rate / emb:.3f}")


def print_report(state: State, checks: list[UserCheck], args: argparse.Namespace, wall: float) -> tuple[int, int]:
    """Prints the figures; returns (stuck, 5xx count)."""
    tasks = list(state.tasks.values())
    writes = [t for t in tasks if t.kind in WRITE_KINDS]
    done_writes = [t for t in writes if t.status == "completed" and t.done_at is not None]
    failed = [t for t in tasks if t.status == "failed"]
    stuck = [t for t in tasks if not t.ended]
    accept_ms = [t.accept_ms for t in writes]
    complete_ms = [(t.done_at - t.accepted) * 1000 for t in done_writes if t.done_at is not None]
    mut = [t for t in tasks if t.kind in ("update", "delete") and t.status == "completed" and t.done_at is not None]
    mut_ms = [(t.done_at - t.accepted) * 1000 for t in mut if t.done_at is not None]
    first = min((t.accepted for t in writes), default=None)
    last = max((t.done_at for t in done_writes if t.done_at is not None), default=None)
    span = (last - first) if first is not None and last is not None else 0.0
    rate = len(done_writes) / span if span > 0 else 0.0
    kinds = Counter(t.kind for t in tasks)
    h = state.health
    deadlocks = (h.deadlock_end - h.deadlock_start
                 if h.deadlock_end is not None and h.deadlock_start is not None else None)
    fivexx = sum(n for (_, status), n in state.statuses.items() if status >= 500)

    rows = [
        ("writes requested / accepted", f"{state.write_requests} / {len(writes)} "
                                        f"(raw {kinds['raw']}, conversation {kinds['conversation']})"),
        ("updates / deletes accepted", f"{kinds['update']} / {kinds['delete']}"),
        ("searches (degraded)", f"{state.searches} ({state.search_degraded})"),
        ("tasks completed / failed / stuck",
         f"{sum(t.status == 'completed' for t in tasks)} / {len(failed)} / {len(stuck)}"),
        ("throughput (completed writes/s)", f"{rate:.1f}  ({len(done_writes)} in {span:.1f}s, first accept "
                                            "-> last completion)"),
        ("accept p50 / p99 ms (writes)", f"{pct(accept_ms, 50):.1f} / {pct(accept_ms, 99):.1f}"),
        ("accepted->completed p50 / p99 ms (writes)", f"{pct(complete_ms, 50):.0f} / {pct(complete_ms, 99):.0f}"),
        ("accepted->completed p50 / p99 ms (upd+del)", f"{pct(mut_ms, 50):.0f} / {pct(mut_ms, 99):.0f}"),
        ("deadlock retries (end - start)", f"{fmt(deadlocks)}  (start {fmt(h.deadlock_start)}, "
                                           f"end {fmt(h.deadlock_end)})"),
        ("outbox peak depth", f"{fmt(h.outbox_peak)}  ({h.samples} health samples)"),
        ("5xx answers / transport errors (retried)", f"{fivexx} / {sum(state.transport_errors.values())} "
                                                     f"({sum(state.transport_retries.values())})"),
        ("wall time", f"{wall:.1f}s"),
    ]
    print("\n--- soak summary ---")
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    for t in failed[:5]:
        print(f"  failed task {t.task_id} ({t.kind}): {t.error}")
    for t in stuck[:5]:
        print(f"  stuck task {t.task_id} ({t.kind}): last status {t.status}, {t.polls} polls")
    if state.duplicate_task_ids:
        print(f"  {state.duplicate_task_ids} accepts returned a task id already seen (distinct requests merged)")

    print("\nnon-2xx answers per route:")
    non2xx = sorted((r, s, n) for (r, s), n in state.statuses.items() if not 200 <= s < 300)
    for route, status, n in non2xx:
        print(f"  {route:<32} {status}: {n}")
    for route, n in sorted(state.transport_errors.items()):
        print(f"  {route:<32} transport error: {n}")
    for route, n in sorted(state.transport_retries.items()):
        print(f"  {route:<32} transport error, resent: {n}")
    if not non2xx and not state.transport_errors:
        print("  none")
    for sample in state.rejected[:5] + state.transport_samples[:5]:
        print(f"  e.g. {sample}")

    cols = ("expected", "in_qdrant", "in_graph", "missing_in_qdrant", "missing_in_graph",
            "unexpected_in_qdrant", "unexpected_in_graph", "deleted_in_qdrant", "deleted_in_graph", "stuck",
            "failed")
    print("\nconsistency (ids):")
    header = f"  {'user':<22}" + "".join(f"{c:>{max(9, len(c) + 1)}}" for c in cols)
    print(header)
    total = {c: 0 for c in cols}
    for uc in checks:
        vals = {c: int(getattr(uc, c)) for c in cols}
        for c in cols:
            total[c] += vals[c]
        print(f"  {uc.user:<22}" + "".join(f"{vals[c]:>{max(9, len(c) + 1)}}" for c in cols))
    print(f"  {'total':<22}" + "".join(f"{total[c]:>{max(9, len(c) + 1)}}" for c in cols))
    for uc in checks:
        for err in uc.listing_errors:
            print(f"  listing error ({uc.user}): {err}")
        for sample in uc.samples[:6]:
            print(f"  e.g. {uc.user} {sample}")
    return len(stuck), fivexx


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> int:
    if args.smoke:
        return await smoke(args)
    return (await soak(args))[0]


async def soak(args: argparse.Namespace) -> tuple[int, State]:
    """The run against --url: (exit status, what the client saw)."""
    tag = uuid.uuid4().hex[:8]
    rng = random.Random(args.seed)
    users = user_ids(tag, args.u)
    state = State()
    state.writes = iter(make_writes(args.n, users, tag, rng))
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    connector = aiohttp.TCPConnector(limit=args.c + 40)
    async with aiohttp.ClientSession(args.url, connector=connector, timeout=aiohttp.ClientTimeout(total=30),
                                     headers=headers) as client:
        retries, body = await read_health(state, client)
        if body is None:
            print(f"error: {args.url}/health unreachable or not JSON; is the service running?")
            return 1, state
        state.health.deadlock_start = retries
        print(f"target {args.url}  run {tag}  users={users}  n={args.n}  c={args.c}  timeout={args.timeout:.0f}s  "
              f"seed={args.seed}  health={body.get('status')} {body.get('checks')}  "
              f"write_path={'present' if isinstance(body.get('write_path'), dict) else 'absent'}", flush=True)

        t0 = time.perf_counter()
        hard_deadline = time.monotonic() + 3 * args.timeout + 60  # the writes themselves are bounded too
        stop = asyncio.Event()
        health_task = asyncio.create_task(health_loop(state, client, stop, int(4 * args.timeout) + 120))
        poll_task_ = asyncio.create_task(poll_loop(state, client, args, random.Random(args.seed + 1), tag,
                                                   hard_deadline))
        max_iter = 20 * args.n + int(3 * args.timeout / 0.05) + 100
        if args.max_pending:  # a held-back client spins every 0.05 s while tasks drain
            max_iter += int((hard_deadline - time.monotonic()) / 0.05)
        if args.rate > 0:
            hard_deadline += args.n / args.rate  # the paced writes alone take n / rate seconds

        async def clients() -> None:
            try:
                await asyncio.gather(*(
                    client_loop(state, client, random.Random(args.seed * 1000 + i), users, hard_deadline, max_iter,
                                args.max_pending, args.rate)
                    for i in range(args.c)
                ))
            finally:
                state.clients_done = True
                state.writes_exhausted = True

        async def progress() -> None:
            for _ in range(int(4 * args.timeout / 10) + 100):
                await asyncio.sleep(10)
                if poll_task_.done():
                    return
                done = sum(t.ended for t in state.tasks.values())
                print(f"  [{time.perf_counter() - t0:6.0f}s] accepted {len(state.tasks)}  ended {done}  "
                      f"pending {len(state.pending)}  outbox peak {fmt(state.health.outbox_peak)}", flush=True)

        progress_task = asyncio.create_task(progress())
        try:
            await clients()
            await poll_task_
        finally:
            stop.set()
            progress_task.cancel()
            await asyncio.gather(health_task, progress_task, return_exceptions=True)
            if not poll_task_.done():
                poll_task_.cancel()
        # one last pass over what is still pending, so the stuck count is current
        for task in list(state.pending.values()):
            await poll_task(state, client, asyncio.Semaphore(1), task, random.Random(0), tag, mutate=False)
        wall = time.perf_counter() - t0
        retries, _ = await read_health(state, client)
        state.health.deadlock_end = retries
        checks = [await check_user(state, client, u) for u in users]
        cleanup_errors = [e for u in users for e in await cleanup_user(state, client, u)] if args.cleanup else []
    stuck, fivexx = print_report(state, checks, args, wall)
    for err in cleanup_errors:
        print(f"  cleanup: {err}")
    if args.embedder != "none":
        await print_embedder_ratio(state, args.embedder)
    mismatches = sum(c.mismatches() for c in checks)
    listing_errors = sum(len(c.listing_errors) for c in checks)
    transport = sum(state.transport_errors.values())
    accepted = sum(t.kind in WRITE_KINDS for t in state.tasks.values())
    verdict = {"stuck": stuck, "consistency_mismatches": mismatches, "5xx": fivexx,
               "transport_errors": transport, "listing_errors": listing_errors, "cleanup_errors": len(cleanup_errors)}
    bad = {k: v for k, v in verdict.items() if v} | ({"writes_accepted": 0} if not accepted else {})
    print(f"\nresult: {'FAIL ' + str(bad) if bad else 'OK'}")
    return 1 if bad else 0, state


async def smoke(args: argparse.Namespace) -> int:
    """--smoke: the soak against a `python -m service` of its own on the test stack, then the verdict."""
    async def run(url: str, _work: Path) -> bool:
        args.url = url
        code, state = await soak(args)
        writes = [t for t in state.tasks.values() if t.kind in WRITE_KINDS]
        done = [t.done_at for t in writes if t.status == "completed" and t.done_at is not None]
        span = max(done, default=0.0) - min((t.accepted for t in writes), default=0.0)
        return (code == 0 and state.write_requests == args.n and len(writes) == args.n and len(done) == args.n
                and span > 0 and len(done) / span > 0)

    return await smoke_against_service("soak", run, DEDUP_CRON_ENABLED="false")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8199", help="base URL of a running service")
    p.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer <key>'")
    p.add_argument("-n", type=int, default=5000, help="writes (raw + conversations)")
    p.add_argument("-c", type=int, default=32, help="concurrent clients")
    p.add_argument("-u", type=int, default=3, help="users (user 0 takes half of the writes)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds to wait for the tasks to end after the last write was accepted")
    p.add_argument("--max-pending", type=int, default=0,
                   help="hold new writes while this many tasks are pending (0: no limit): a closed loop that keeps "
                        "the queue short on a slow or shared machine")
    p.add_argument("--rate", type=float, default=0.0,
                   help="start at most this many writes a second over all clients (0: as fast as the clients go): "
                        "a load whose rate does not follow the machine's")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cleanup", action="store_true",
                   help="delete every memory of the run's users at the end (constant data over rounds)")
    p.add_argument("--embedder", choices=("local", "hash", "none"), default="local",
                   help="embedder whose raw rate is printed beside the memories stored per second")
    p.add_argument("--smoke", action="store_true", help="a short check on the test stack: its own service, -n 24 "
                                                        "-c 4 -u 2 --cleanup, then `smoke: OK` or exit 1")
    args = p.parse_args()
    if args.smoke:
        args.n, args.c, args.u, args.timeout, args.max_pending, args.rate = 24, 4, 2, 60.0, 0, 0.0
        args.cleanup, args.embedder, args.api_key = True, "hash", None
    if args.n < 1 or args.c < 1 or args.u < 1 or args.timeout <= 0 or args.rate < 0:
        p.error("-n, -c and -u must be >= 1, --timeout > 0 and --rate >= 0")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
