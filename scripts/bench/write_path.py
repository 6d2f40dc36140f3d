"""Write-path benchmark: accept latency of POST /v1/memories/raw, worker throughput, raw embedder throughput.

Targets a running stack by URL and starts nothing. Figures are printed side by side from one run:

    .venv/bin/python scripts/bench/write_path.py --url http://127.0.0.1:8199 -n 500 -c 16 [--embedder local|hash]
    # open loop: the writes are sent at 1,000/s over 16 connections whatever the answers take
    .venv/bin/python scripts/bench/write_path.py -n 5000 -c 16 --rate 1000
    # several memories per request (POST /v1/memories/raw/batch, one task and one job per batch)
    .venv/bin/python scripts/bench/write_path.py -n 2000 -c 16 --batch 20
    # conversation writes: every stage of the write runs (extract, draft, store, changes, supersede, messages)
    .venv/bin/python scripts/bench/write_path.py -n 400 -c 8 --conversations
    # two configurations side by side (each started by you), the same load one after the other:
    .venv/bin/python scripts/bench/write_path.py --url inline=http://127.0.0.1:18301 --url child=http://127.0.0.1:18302

The load comes from aiohttp (about 0.25 ms of this process's CPU per request; httpx took 2.1 ms, so at a few
hundred requests/s it was the client, not the service, that set the accept figures on a 2-core machine). Without
`--rate` each of the `-c` clients sends its next write when the last one is answered (closed loop: latency is
then at least c / throughput by Little's law). With `--rate R` the writes are due at R per second and an accept's
latency runs from the moment it was due, so a request that waited for a free connection counts its wait (no
coordinated omission). The client's own CPU per request is printed beside the figures.

The worker's metrics (`--worker-metrics LABEL=http://127.0.0.1:PORT/metrics` with the service's WORKER_METRICS_PORT,
or the API's /metrics with WORKER_PROCESS=inline) also give its embedder calls and texts per memory stored, by the
stage that made them (memory_write_embed_calls_total: store, changes, known, rewrite).

`--pid service=PID --pid neo4j=PID ...` also counts each process's CPU (with its live children) per memory
stored, and prints the CPU budget per memory that 0.8x the embedder's rate leaves on this machine's cores.

`--smoke` (no other argument needed): starts its own `python -m service` on the test stack (TEST_REDIS_URL,
TEST_NEO4J_URI, TEST_NEO4J_DATABASE; hash embedder, a queue of its own; scripts/bench/procs.py), writes -n 20 with
-c 4 (the hash embedder for the in-process figure, --timeout 60), stops it, then prints `smoke: OK` when every write
was accepted and completed and the rates are > 0, else `smoke: FAIL` (exit status 1).

Exit status: 0 when every request was accepted and every task completed, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `service` importable without an editable install

from scripts.bench.common import HTTP_ERRORS, cpu_seconds, embedder_rate, fetch, pct  # noqa: E402
from scripts.bench.procs import free_port, smoke_against_service  # noqa: E402

CATEGORIES = ("preference", "personal_fact", "technical_skill", "domain_knowledge")
TEMPLATES = (
    "Prefers {x} for {y}",
    "Works mostly with {x} when doing {y}",
    "Knows {x} well and uses it for {y}",
    "Learned that {x} is the usual choice for {y}",
    "Dislikes using anything but {x} for {y}",
)
XS = ("Python", "Rust", "PostgreSQL", "Redis", "tabs", "4-space indentation", "pytest", "vim", "Docker", "type hints")
YS = ("data pipelines", "web APIs", "code review", "side projects", "shell scripts", "CI jobs", "prototyping")
POLL_INTERVAL = 0.2
DEFAULT_URL = "http://127.0.0.1:8199"


@dataclass
class Run:
    latencies_ms: list[float] = field(default_factory=list)
    task_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    first_accept: float | None = None
    last_done: float | None = None
    completed: int = 0
    memories: int = 0  # stored by the completed tasks (a batch's task stores several)
    failed: int = 0
    failures: list[str] = field(default_factory=list)


def make_texts(n: int, run_tag: str) -> list[str]:
    return [
        TEMPLATES[i % len(TEMPLATES)].format(x=XS[i % len(XS)], y=YS[(i // len(XS)) % len(YS)])
        + f" (run {run_tag} #{i})"
        for i in range(n)
    ]




async def submit(client: aiohttp.ClientSession, run: Run, path: str, body: dict[str, Any], due: float) -> None:
    """One accept; its latency runs from `due` (when it was sent, or when the open loop wanted it sent)."""
    try:
        resp = await fetch(client, "POST", path, json=body)
    except HTTP_ERRORS as exc:
        run.errors.append(f"{type(exc).__name__}: {exc}")
        return
    t1 = time.perf_counter()
    if resp.status_code != 202:
        run.errors.append(f"HTTP {resp.status_code}: {resp.text[:200]}")
        return
    run.latencies_ms.append((t1 - due) * 1000)
    run.first_accept = t1 if run.first_accept is None else min(run.first_accept, t1)
    run.task_ids.append(resp.json()["task_id"])


async def accept_all(client: aiohttp.ClientSession, run: Run, path: str, bodies: list[dict[str, Any]], clients: int,
                     rate: float | None) -> None:
    """`clients` senders share the bodies. Closed loop (rate None): each sends its next one when the last is
    answered. Open loop: body i is due at start + i / rate; a sender that is late sends at once and the wait
    counts in that accept's latency."""
    start = time.perf_counter()
    queue = iter(enumerate(bodies))

    async def sender() -> None:
        for i, body in queue:
            due = time.perf_counter()
            if rate is not None:
                due = start + i / rate
                if (wait := due - time.perf_counter()) > 0:
                    await asyncio.sleep(wait)
            await submit(client, run, path, body, due)

    await asyncio.gather(*(sender() for _ in range(clients)))


async def write_embeds(client: aiohttp.ClientSession, metrics: str) -> dict[str, float]:
    """The worker's embedder calls and texts so far, from its metrics (memory_write_embed_calls_total,
    memory_write_embedded_texts_total, every stage), and per stage; empty when they are not readable. `metrics`: the
    worker's metrics URL (WORKER_METRICS_PORT: the worker runs in a process of its own by default), or the API's
    /metrics (WORKER_PROCESS=inline)."""
    try:
        resp = await fetch(client, "GET", metrics)
    except HTTP_ERRORS:
        return {}
    if resp.status_code != 200:
        return {}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(resp.text):
        kind = {"memory_write_embed_calls": "calls", "memory_write_embedded_texts": "texts"}.get(family.name, "")
        for sample in family.samples if kind else ():
            if sample.name.endswith("_total"):
                out[kind] = out.get(kind, 0.0) + sample.value
                out[f"{kind}:{sample.labels.get('stage')}"] = sample.value
    return out


def conversation(i: int, text: str, user_id: str) -> dict[str, Any]:
    """`--conversations`: a two-message conversation; every fourth corrects the one before it, so the write's
    change and supersede stages run too."""
    said = f"actually, we switched that now: {text}" if i % 4 == 3 else text
    return {"user_id": user_id, "messages": [{"role": "user", "content": said},
                                             {"role": "assistant", "content": "Noted."}]}


async def gc_pauses(client: aiohttp.ClientSession) -> dict[str, float]:
    """The service process's GC pauses so far, from /metrics (process_gc_pause_seconds): count, total seconds and
    the count over 50 ms, all generations; empty when /metrics is not readable (an admin key is needed then)."""
    try:
        resp = await fetch(client, "GET", "/metrics")
    except HTTP_ERRORS:
        return {}
    if resp.status_code != 200:
        return {}
    out = {"count": 0.0, "sum": 0.0, "under_50ms": 0.0}
    for family in text_string_to_metric_families(resp.text):
        if family.name != "process_gc_pause_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_count"):
                out["count"] += sample.value
            elif sample.name.endswith("_sum"):
                out["sum"] += sample.value
            elif sample.name.endswith("_bucket") and sample.labels.get("le") == "0.05":
                out["under_50ms"] += sample.value
    return out


async def poll_once(client: aiohttp.ClientSession, sem: asyncio.Semaphore, run: Run, task_id: str) -> bool:
    """True when the task reached a final state (or is unknown); transient errors are retried next round."""
    async with sem:
        try:
            resp = await fetch(client, "GET", f"/v1/memories/status/{task_id}")
        except HTTP_ERRORS:
            return False
    if resp.status_code == 404:
        run.failed += 1
        run.failures.append(f"{task_id}: unknown or expired (404)")
        return True
    if resp.status_code != 200:
        return False
    data = resp.json()
    if data["status"] not in ("completed", "failed"):
        return False
    run.last_done = time.perf_counter()
    if data["status"] == "completed":
        run.completed += 1
        run.memories += len((data.get("result") or {}).get("memories") or [])
    else:
        run.failed += 1
        run.failures.append(f"{task_id}: {data.get('error')}")
    return True


async def wait_all(
    client: aiohttp.ClientSession, sem: asyncio.Semaphore, run: Run, window: int, limit_s: float
) -> list[str]:
    """Poll pending tasks every POLL_INTERVAL until none is left or `limit_s` passes; returns the pending.

    Tasks finish roughly in submission order, so each round walks the pending list in windows of
    `window` tasks and stops at the first window where nothing finished: the status polls stay light
    (the embedded worker shares the API's event loop) yet catch up quickly after a burst.
    """
    pending = list(run.task_ids)
    deadline = time.monotonic() + limit_s
    for _ in range(int(limit_s / POLL_INTERVAL) + 1):
        if not pending or time.monotonic() >= deadline:
            break
        still: list[str] = []
        for start in range(0, len(pending), window):
            chunk = pending[start : start + window]
            done = await asyncio.gather(*(poll_once(client, sem, run, t) for t in chunk))
            still += [t for t, d in zip(chunk, done, strict=True) if not d]
            if not any(done):
                still += pending[start + window :]
                break
        pending = still
        if pending:
            await asyncio.sleep(POLL_INTERVAL)
    return pending


async def measure(url: str, args: argparse.Namespace, label: str) -> dict[str, object] | None:
    """One target: accept the writes, wait for every task; the figures (None when it is unreachable)."""
    run_tag = uuid.uuid4().hex[:8]
    user_id = args.user_id or f"bench-{run_tag}"
    texts = make_texts(args.n, run_tag)
    run = Run()
    sem = asyncio.Semaphore(args.c)
    connector = aiohttp.TCPConnector(limit=args.c)
    async with aiohttp.ClientSession(url, connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as client:
        try:
            health = await fetch(client, "GET", "/health")
        except HTTP_ERRORS as exc:
            print(f"error: {url}/health unreachable ({type(exc).__name__}: {exc}); is the service running?")
            return None
        if health.status_code != 200:
            print(f"error: {url}/health answered {health.status_code}: {health.text[:300]}")
            return None
        mode = f"open loop at {args.rate:g}/s" if args.rate else "closed loop"
        print(f"[{label}] target {url}  user_id={user_id}  n={args.n}  c={args.c}  {mode}  "
              f"health={health.json().get('checks')}")

        cpu0 = {name: cpu_seconds(pid) for name, pid in args.pid}
        gc0 = await gc_pauses(client)
        metrics = dict(m.split("=", 1) if "=" in m else (label, m) for m in args.worker_metrics).get(label, "/metrics")
        embeds0 = await write_embeds(client, metrics)
        own0 = time.process_time()
        t0 = time.perf_counter()
        items = [{"content": t, "category": CATEGORIES[i % len(CATEGORIES)]} for i, t in enumerate(texts)]
        if args.conversations:  # conversation writes (extract, draft, store, changes, supersede, messages)
            path, bodies = "/v1/memories", [conversation(i, t, user_id) for i, t in enumerate(texts)]
        elif args.batch > 1:  # K memories per request, one task each
            path = "/v1/memories/raw/batch"
            bodies = [{"user_id": user_id, "memories": items[i : i + args.batch]}
                      for i in range(0, len(items), args.batch)]
        else:
            path, bodies = "/v1/memories/raw", [{**item, "user_id": user_id} for item in items]
        await accept_all(client, run, path, bodies, args.c, args.rate)
        accept_wall = time.perf_counter() - t0
        client_ms = (time.process_time() - own0) * 1000 / max(len(bodies), 1)
        lat = run.latencies_ms
        accepted_per_s = len(lat) / accept_wall if accept_wall > 0 else 0.0
        print(
            f"[{label}] accept: {len(lat)}/{len(bodies)} in {accept_wall:.2f}s = {accepted_per_s:.1f}/s  "
            f"p50={pct(lat, 50):.1f} p95={pct(lat, 95):.1f} p99={pct(lat, 99):.1f} max={pct(lat, 100):.1f} ms  "
            f"(client CPU {client_ms:.2f} ms per request)"
        )
        for err in run.errors[:5]:
            print(f"  request error: {err}")

        pending = await wait_all(client, sem, run, args.c, args.timeout)
        cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in args.pid}
        gc1 = await gc_pauses(client)
        embeds1 = await write_embeds(client, metrics)
    embeds = {k: v - embeds0.get(k, 0.0) for k, v in embeds1.items()}
    gc_run = {k: gc1[k] - gc0[k] for k in gc1} if gc0 and gc1 else {}
    done_s = (run.last_done - run.first_accept) if run.last_done and run.first_accept else 0.0
    worker_rate = run.memories / done_s if done_s > 0 else 0.0
    print(
        f"[{label}] tasks: completed={run.completed} ({run.memories} memories) failed={run.failed} "
        f"timed_out={len(pending)}  "
        f"first accept -> last completion {done_s:.2f}s = {worker_rate:.1f} memories/s"
    )
    for failure in run.failures[:5]:
        print(f"  task failed: {failure}")
    if gc_run:
        print(f"[{label}] GC pauses of the API process: {gc_run['count']:.0f}, {gc_run['sum'] * 1000:.0f} ms in all, "
              f"{gc_run['count'] - gc_run['under_50ms']:.0f} over 50 ms")
    per_memory = {f"cpu_ms_per_memory_{name}": s * 1000 / max(run.memories, 1) for name, s in cpu.items()}
    if embeds:
        stages = ", ".join(f"{k.split(':', 1)[1]} {v:.0f}" for k, v in sorted(embeds.items()) if k.startswith("calls:"))
        print(f"[{label}] embedder: {embeds.get('calls', 0):.0f} calls, {embeds.get('texts', 0):.0f} texts for "
              f"{run.memories} memories (calls by stage: {stages})")
        per_memory["embed_calls_per_memory"] = embeds.get("calls", 0.0) / max(run.memories, 1)
        per_memory["embedded_texts_per_memory"] = embeds.get("texts", 0.0) / max(run.memories, 1)
    return {**per_memory,
        "accepted": len(lat), "request_errors": len(run.errors), "accept_p50_ms": pct(lat, 50),
        "accept_p95_ms": pct(lat, 95), "accept_p99_ms": pct(lat, 99), "accept_max_ms": pct(lat, 100),
        "accepted_per_s": accepted_per_s, "client_cpu_ms_per_accept": client_ms, "completed": run.completed,
        "memories_stored": run.memories,
        "failed": run.failed, "timed_out": len(pending), "completion_s": done_s, "worker_memories_per_s": worker_rate,
    }


async def main(args: argparse.Namespace) -> int:
    if args.smoke:
        return await smoke(args)
    return (await bench(args))[0]


async def bench(args: argparse.Namespace) -> tuple[int, dict[str, dict[str, object]], float]:
    """Every target measured, then the embedder: (exit status, the figures per target, the embedder's texts/s)."""
    targets = [(t.split("=", 1) if "=" in t else (t, t)) for t in args.url] or [("service", DEFAULT_URL)]
    results: dict[str, dict[str, object]] = {}
    for label, url in targets:
        figures = await measure(url, args, label)
        if figures is None:
            return 1, results, 0.0
        results[label] = figures
    emb_name, emb_rate, emb_cpu = await embedder_rate(args.embedder, make_texts(args.n, "embedder"))
    print(f"embedder {emb_name}: {emb_rate:.1f} texts/s, {emb_cpu:.2f} ms CPU per text (batches of 64, in this "
          f"process)")

    print("\n--- summary (side by side) ---")
    print("| figure | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for key in next(iter(results.values())):
        print(f"| {key} | " + " | ".join(_fmt(r[key]) for r in results.values()) + " |")
    ratios = [float(str(r["worker_memories_per_s"])) / emb_rate if emb_rate > 0 else 0.0 for r in results.values()]
    print(f"| worker / embedder ({emb_rate:.1f} texts/s) | " + " | ".join(f"{x:.3f}" for x in ratios) + " |")
    if args.pid:
        # The CPU budget of the 0.8x target: at 0.8x the embedder's rate the machine's cores allow this much CPU
        # per memory, of which embedding takes emb_cpu; every --pid process's share of what is left is above.
        cores = os.cpu_count() or 1
        budget = cores * 1000 / (0.8 * emb_rate) if emb_rate > 0 else 0.0
        spent = [sum(float(str(v)) for k, v in r.items() if k.startswith("cpu_ms_per_memory_"))
                 for r in results.values()]
        print("| CPU ms per memory, the --pid processes together | " + " | ".join(f"{x:.1f}" for x in spent) + " |")
        print(f"CPU budget at 0.8x the embedder on {cores} cores: {budget:.1f} ms per memory, of which embedding "
              f"{emb_cpu:.1f} ms")
    bad = any(r["request_errors"] or r["failed"] or r["timed_out"] for r in results.values())
    return 1 if bad else 0, results, emb_rate


async def smoke(args: argparse.Namespace) -> int:
    """--smoke: the bench against a `python -m service` of its own on the test stack, then the verdict."""
    async def run(url: str, _work: Path) -> bool:
        args.url = [f"smoke={url}"]
        code, results, emb_rate = await bench(args)
        figures = results.get("smoke", {})
        return (code == 0 and figures.get("accepted") == args.n and figures.get("completed") == args.n
                and figures.get("memories_stored") == args.n and float(str(figures.get("accepted_per_s", 0))) > 0
                and float(str(figures.get("worker_memories_per_s", 0))) > 0 and emb_rate > 0
                and float(str(figures.get("embed_calls_per_memory", 0))) > 0)

    port = free_port()
    args.worker_metrics = [f"smoke=http://127.0.0.1:{port}/metrics"]
    return await smoke_against_service("write-path", run, WORKER_METRICS_PORT=str(port))


def _fmt(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", action="append", default=[],
                   help=f"a running service, as URL or label=URL; repeat to measure several side by side "
                        f"(default {DEFAULT_URL})")
    p.add_argument("-n", type=int, default=500, help="number of memories to write")
    p.add_argument("-c", type=int, default=16, help="concurrent clients (connections)")
    p.add_argument("--worker-metrics", action="append", default=[],
                   help="LABEL=URL (one per --url LABEL): the target's worker metrics (http://127.0.0.1:PORT/metrics, "
                        "its WORKER_METRICS_PORT) for its embedder calls per memory; default: the target's /metrics "
                        "(a WORKER_PROCESS=inline worker)")
    p.add_argument("--conversations", action="store_true",
                   help="conversation writes (POST /v1/memories, two messages; every fourth a correction) instead "
                        "of raw ones: every stage of the write runs")
    p.add_argument("--batch", type=int, default=1,
                   help="memories per request: above 1, POST /v1/memories/raw/batch (one task per batch); -n still "
                        "counts memories")
    p.add_argument("--rate", type=float, default=None,
                   help="open loop: send the writes at this many per second in all (default: closed loop)")
    p.add_argument("--embedder", choices=("local", "hash"), default="local", help="embedder for the in-process figure")
    p.add_argument("--user-id", default=None, help="user id to write under (default: bench-<random>)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for all tasks to finish")
    p.add_argument("--pid", action="append", default=[], metavar="LABEL=PID",
                   help="a process whose CPU (with its live children) is counted per memory stored, e.g. "
                        "service=<pid of python -m service>, neo4j=<pid>, redis=<pid>; repeatable")
    p.add_argument("--smoke", action="store_true",
                   help="a short check on the test stack: its own service, -n 20 -c 4, then `smoke: OK` or exit 1")
    args = p.parse_args()
    if args.smoke:
        args.n, args.c, args.batch, args.rate, args.embedder, args.timeout, args.pid = 20, 4, 1, None, "hash", 60.0, []
    try:
        args.pid = [(label, int(pid)) for label, pid in (x.split("=", 1) for x in args.pid)]
    except ValueError:
        p.error("--pid takes LABEL=PID")
    if not 1 <= args.batch <= 100:
        p.error("--batch must be 1-100 (the batch route's limit)")
    if args.n < 1 or args.c < 1 or args.timeout <= 0 or (args.rate is not None and args.rate <= 0):
        p.error("-n and -c must be >= 1, --timeout and --rate > 0")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
