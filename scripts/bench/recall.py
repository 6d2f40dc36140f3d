"""Retrieval quality on conversations in the public LoCoMo JSON layout, through the public API only.

    .venv/bin/python scripts/bench/recall.py --data ../shared/data/locomo-dev.json --url http://127.0.0.1:8199 \
        [--ingest turns|sessions] [--fit] [--json-out FILE] [--user-prefix P [--skip-ingest]]

1. Ingest, one user per sample:
   - `turns`: every turn is one `POST /v1/memories/raw` (category `interaction`, content
     `"<speaker>: <text>"` plus ` [shares a photo: <caption>]` when the turn has one, `occurred_at` = its
     session's date, metadata `dia_id`, `session`, `speaker`, `thread_id` `session-<n>` and `position` its place
     in the session, so search can add a hit's neighbouring turns); the task result's memory id maps back to the
     dia_id.
   - `sessions`: every session is one `POST /v1/memories` (the conversation path, through extraction:
     messages `{id: dia_id, role: "user", content: "<speaker>: <text>", timestamp: session date}`); a
     memory covers the turns in its `source_message_ids`.
   - `--skip-ingest --user-prefix P`: nothing is written; the users `P-<sample>` of an earlier run with the
     same `--ingest` mode are read back (`GET /v1/memories`: a turn's memory by its `dia_id` metadata, a
     session memory by its `source_message_ids`). To iterate on query-side changes: ingest once with a fixed
     prefix, then restart the service and re-run the queries on the same data.
2. Query: every QA item with evidence, for its sample's user, once per retriever: `dense`, `lexical`,
   `graph`, `time` (`retrievers: [<one>]`, limit 50) and `fused` (all retrievers, limit 20), all with
   `collapse: false` (every memory in its own slot, so the offline fusions below replay them), and
   `collapsed` (the API's default search, collapse by source on, limit 50: what an agent gets).
   Category 5 (adversarial: no evidence) is left out.
   Offline, from the single-retriever lists of the same run: `fused-replay` (the served fusion recomputed
   from the lists with `--weights`: it matches `fused`, a check of the harness),
   `fused-no-graph` (the same without the graph retriever: what the second store adds) and `interleave` (the v1 design's
   order: dense-1, graph-1, dense-2, ...). With `--fit`, a grid of RRF weights and k is scored on the lists and
   the best by R@10 is printed (fit on one split: `--fit-split even` fits on even-numbered questions and
   reports the odd ones, so the printed figure is not the one it was chosen on). `--variants collapsed` (or any
   comma-separated subset) asks only those lists: a quicker run while iterating on a query-side setting.
3. Score: recall@k = evidence turns covered by the top k / evidence turns, mean per category (1
   multi-hop, 2 temporal, 3 open-domain, 4 single-hop) and overall; hit@1, hit@10 and hit@1024t: the share of
   questions with at least one evidence turn found (a question counts 1 when any is). R@512t and R@1024t: the
   evidence covered by the results whose contents, in order, fit in the first 512 / 1,024 tokens
   (all-MiniLM-L6-v2's tokenizer, service/ai/tokens.py; a result that would cross the bound and everything after it
   count for nothing). A slot
   covers the turns of its memory (in `sessions` mode its `source_message_ids`, which include those of the
   memories folded into it).

`--smoke` (no other argument needed): starts its own `python -m service` on the test stack (TEST_REDIS_URL,
TEST_NEO4J_URI, TEST_NEO4J_DATABASE; hash embedder, a queue of its own;
scripts/bench/procs.py), runs `--data tests/data/locomo_sample.json --ingest turns` (every variant) against it, stops
it, then prints `smoke: OK` when every turn was ingested, every search answered, the table has an `all` row per
variant with recall in 0-1 rising with k and `fused` equal to `fused-replay`, else `smoke: FAIL` (exit status 1).

Exit status: 0 when everything was ingested and every search answered 200 without `degraded`; 1
otherwise; 2 for unusable input.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

import dateparser
import httpx

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `service` importable without an editable install
from scripts.bench.procs import smoke_against_service  # noqa: E402
from service.ai.tokens import token_counter  # noqa: E402
from service.search.fusion import fuse  # noqa: E402

KS = (1, 5, 10, 20)
HIT_KS = (1, 10)  # hit@k: a question counts 1 when any of its evidence turns is found
TOKEN_BUDGETS = (512, 1024)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
RETRIEVERS = ("dense", "lexical", "graph", "time")
VARIANTS = (*RETRIEVERS, "fused", "collapsed")
LIST_LIMIT = 50
SMOKE_DATA = ROOT / "tests" / "data" / "locomo_sample.json"
POLL_INTERVAL = 0.2
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_ID_SAFE = re.compile(r"[^A-Za-z0-9_.:@-]")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    content: str
    session: int
    date_time: str | None


@dataclass
class Sample:
    sample_id: str
    user_id: str
    turns: list[Turn]
    qa: list[dict[str, Any]]
    memory_dia: dict[str, set[str]] = field(default_factory=dict)  # memory id -> dia_ids
    tokens: dict[str, int] = field(default_factory=dict)  # memory id -> tokens of its content (as searched)


@dataclass
class Question:
    sample: Sample
    index: int
    category: int
    text: str
    evidence: set[str]
    lists: dict[str, list[str]] = field(default_factory=dict)  # variant -> memory ids, best first


def session_time(text: Any) -> str | None:
    """LoCoMo's "1:56 pm on 8 May, 2023" as ISO 8601 (UTC), or None."""
    if not text:
        return None
    moment = dateparser.parse(str(text), languages=["en"],
                              settings={"TIMEZONE": "UTC", "RETURN_AS_TIMEZONE_AWARE": True})
    return None if moment is None else moment.astimezone(UTC).isoformat()


# --------------------------------------------------------------------------------------------
# input
# --------------------------------------------------------------------------------------------


def load_samples(path: Path, prefix: str) -> list[Sample]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list) or not data:
        raise ValueError(f"{path}: expected a non-empty JSON list of samples")
    samples: list[Sample] = []
    for index, raw in enumerate(data):
        conv = raw.get("conversation")
        if not isinstance(conv, dict):
            raise ValueError(f"{path}: sample {index} has no 'conversation' object")
        sample_id = str(raw.get("sample_id") or f"s{index}")
        sessions = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)))
        turns: list[Turn] = []
        for n in sessions:
            for turn in conv[f"session_{n}"] or []:
                text = str(turn.get("text") or "").strip()
                caption = str(turn.get("blip_caption") or "").strip()
                if caption:
                    text = f"{text} [shares a photo: {caption}]".strip()
                if not text:
                    continue
                turns.append(Turn(
                    dia_id=str(turn["dia_id"]).strip(),
                    speaker=str(turn["speaker"]),
                    content=f"{turn['speaker']}: {text}",
                    session=n,
                    date_time=session_time(conv.get(f"session_{n}_date_time")),
                ))
        if not turns:
            raise ValueError(f"{path}: sample {sample_id} has no turns")
        user = _ID_SAFE.sub("-", f"{prefix}-{sample_id}")[:128]
        samples.append(Sample(sample_id, user, turns, list(raw.get("qa") or [])))
    return samples


def evidence_ids(item: dict[str, Any]) -> list[str]:
    """Evidence dia_ids; LoCoMo has a few entries holding several ids ("D8:6; D9:17")."""
    out: list[str] = []
    for ev in item.get("evidence") or []:
        out += [part.strip() for part in re.split(r"[;,]", str(ev)) if part.strip()]
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------------------------
# ingestion
# --------------------------------------------------------------------------------------------


def write_requests(samples: list[Sample], mode: str) -> list[tuple[Sample, str, dict[str, Any]]]:
    """(sample, path, body) of every write of the mode."""
    out: list[tuple[Sample, str, dict[str, Any]]] = []
    for sample in samples:
        if mode == "turns":
            position: dict[int, int] = {}  # the next position in each session
            for t in sample.turns:
                body: dict[str, Any] = {
                    "content": t.content, "user_id": sample.user_id, "category": "interaction",
                    "metadata": {"dia_id": t.dia_id, "session": t.session, "speaker": t.speaker},
                    "thread_id": f"session-{t.session}", "position": position.get(t.session, 0)}
                position[t.session] = body["position"] + 1
                if t.date_time:
                    body["occurred_at"] = t.date_time
                out.append((sample, "/v1/memories/raw", body))
            continue
        for _, group in itertools.groupby(sample.turns, key=lambda t: t.session):
            turns = list(group)
            messages = [{"id": t.dia_id, "role": "user", "content": t.content[:20_000],
                         **({"timestamp": t.date_time} if t.date_time else {})} for t in turns]
            for start in range(0, len(messages), 500):
                out.append((sample, "/v1/memories", {"messages": messages[start:start + 500],
                                                      "user_id": sample.user_id}))
    return out


def map_memories(sample: Sample, body: dict[str, Any], memories: list[dict[str, Any]]) -> str | None:
    """Record which dia_ids each stored memory covers; a problem text when it cannot be told."""
    if "content" in body:  # a raw write: its one memory is the turn
        if len(memories) != 1:
            return f"expected one memory in the result, got {len(memories)}"
        sample.memory_dia.setdefault(memories[0]["id"], set()).add(body["metadata"]["dia_id"])
        return None
    known = {m["id"] for m in body["messages"]}
    for m in memories:
        ids = set(m.get("source_message_ids") or []) & known
        if not ids:
            return f"memory {m['id']} names no source message of its conversation"
        sample.memory_dia.setdefault(m["id"], set()).update(ids)
    return None


async def ingest(client: httpx.AsyncClient, samples: list[Sample], mode: str, concurrency: int,
                 timeout_s: float) -> list[str]:
    """Send every write and wait for every task; returns the problems (empty = all ingested)."""
    sem = asyncio.Semaphore(concurrency)
    problems: list[str] = []
    tasks: dict[str, list[tuple[Sample, dict[str, Any]]]] = {}

    async def submit(sample: Sample, path: str, body: dict[str, Any]) -> None:
        async with sem:
            try:
                resp = await client.post(path, json=body)
            except httpx.HTTPError as exc:
                problems.append(f"{sample.sample_id} {path}: {type(exc).__name__}: {exc}")
                return
        if resp.status_code != 202:
            problems.append(f"{sample.sample_id} {path}: HTTP {resp.status_code}: {resp.text[:200]}")
            return
        tasks.setdefault(resp.json()["task_id"], []).append((sample, body))

    await asyncio.gather(*(submit(s, p, b) for s, p, b in write_requests(samples, mode)))

    async def poll(task_id: str) -> bool:
        async with sem:
            try:
                resp = await client.get(f"/v1/memories/status/{task_id}")
            except httpx.HTTPError:
                return False  # transient: next round
        if resp.status_code != 200:
            if resp.status_code == 404:
                problems.append(f"task {task_id}: unknown or expired (404)")
            return resp.status_code == 404
        status = resp.json()
        if status["status"] == "failed":
            problems.append(f"task {task_id}: failed: {status.get('error')}")
            return True
        if status["status"] != "completed":
            return False
        memories = (status.get("result") or {}).get("memories") or []
        for sample, body in tasks[task_id]:
            if (problem := map_memories(sample, body, memories)) is not None:
                problems.append(f"task {task_id}: {problem}")
        return True

    pending = list(tasks)
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / POLL_INTERVAL) + 1):
        if not pending or time.monotonic() >= deadline:
            break
        # Tasks finish roughly in submission order: poll in windows and stop a round at the first
        # window where nothing finished, so thousands of pending tasks are not polled every round.
        window = 4 * concurrency
        still: list[str] = []
        for start in range(0, len(pending), window):
            chunk = pending[start : start + window]
            done = await asyncio.gather(*(poll(t) for t in chunk))
            still += [t for t, d in zip(chunk, done, strict=True) if not d]
            if not any(done):
                still += pending[start + window :]
                break
        pending = still
        if pending:
            await asyncio.sleep(POLL_INTERVAL)
    problems += [f"task {t}: not finished after {timeout_s:.0f}s" for t in pending]
    return problems


async def read_back(client: httpx.AsyncClient, samples: list[Sample], mode: str) -> list[str]:
    """`--skip-ingest`: map the memories an earlier run stored for these users back to their turns."""
    problems: list[str] = []
    for sample in samples:
        known = {t.dia_id for t in sample.turns}
        cursor: str | None = None
        for _ in range(10_000):  # bounded: pages of 500
            params: dict[str, Any] = {"user_id": sample.user_id, "limit": 500}
            if cursor:
                params["cursor"] = cursor
            resp = await client.get("/v1/memories", params=params)
            if resp.status_code != 200:
                return [f"{sample.sample_id}: GET /v1/memories: HTTP {resp.status_code}: {resp.text[:200]}"]
            page = resp.json()
            for m in page["memories"]:
                if mode == "turns":
                    ids = {str((m.get("metadata") or {}).get("dia_id", ""))} & known
                else:
                    ids = set(m.get("source_message_ids") or []) & known
                if ids:
                    sample.memory_dia.setdefault(m["id"], set()).update(ids)
            cursor = page.get("next_cursor")
            if not cursor:
                break
        if not sample.memory_dia:
            problems.append(f"{sample.sample_id}: user {sample.user_id} holds no memory of this data ({mode} mode)")
    return problems


# --------------------------------------------------------------------------------------------
# queries and offline fusion
# --------------------------------------------------------------------------------------------


def questions_of(samples: list[Sample]) -> tuple[list[Question], dict[str, int]]:
    out: list[Question] = []
    stats = {"skipped_no_evidence": 0, "dropped_evidence_ids": 0}
    for sample in samples:
        known = {t.dia_id for t in sample.turns}
        for item in sample.qa:
            wanted = evidence_ids(item)
            evidence = {e for e in wanted if e in known}
            stats["dropped_evidence_ids"] += len(wanted) - len(evidence)
            category = int(item.get("category") or 0)
            if not evidence or category == 5 or not str(item.get("question") or "").strip():
                stats["skipped_no_evidence"] += 1
                continue
            out.append(Question(sample, len(out), category, str(item["question"])[:2000], evidence))
    return out, stats


async def run_queries(client: httpx.AsyncClient, questions: list[Question], concurrency: int,
                      variants: tuple[str, ...] = VARIANTS) -> list[str]:
    """Fill every question's lists: one request per retriever (limit 50), the fusion without collapse (limit 20)
    and the served search, collapsed (limit 50); `variants` (--variants) only those."""
    sem = asyncio.Semaphore(concurrency)
    problems: list[str] = []
    counter = token_counter(None)

    async def one(q: Question, variant: str) -> None:
        body: dict[str, Any] = {"query": q.text, "user_id": q.sample.user_id,
                                "limit": 20 if variant == "fused" else LIST_LIMIT}
        if variant != "collapsed":
            body["collapse"] = False  # each memory in its own slot: what the offline fusions replay
        if variant not in ("fused", "collapsed"):
            body["retrievers"] = [variant]
        async with sem:
            try:
                resp = await client.post("/v1/search", json=body)
            except httpx.HTTPError as exc:
                problems.append(f"search {q.text[:60]!r}: {type(exc).__name__}: {exc}")
                return
        if resp.status_code != 200:
            problems.append(f"search {q.text[:60]!r}: HTTP {resp.status_code}: {resp.text[:200]}")
            return
        answer = resp.json()
        if answer.get("degraded"):
            problems.append(f"search {q.text[:60]!r}: degraded {answer['degraded']}")
        q.lists[variant] = [r["id"] for r in answer["results"]]
        for r in answer["results"]:
            if r["id"] not in q.sample.tokens:
                q.sample.tokens[r["id"]] = counter.count(r["content"])

    await asyncio.gather(*(one(q, v) for q in questions for v in variants))
    return problems


def rrf(lists: dict[str, list[str]], weights: dict[str, float], k: float) -> list[str]:
    """The service's own fusion (service/search/fusion.py) over the retrievers' lists."""
    return [f.id for f in fuse({name: [(mid, 0.0) for mid in ids] for name, ids in lists.items()}, weights, k)]


def interleave(lists: dict[str, list[str]]) -> list[str]:
    out: list[str] = []
    for pair in itertools.zip_longest(lists.get("dense", []), lists.get("graph", [])):
        out += [m for m in pair if m is not None and m not in out]
    return out


def recall_at(q: Question, ranked: list[str], k: int) -> float:
    found: set[str] = set()
    for mid in ranked[:k]:
        found |= q.sample.memory_dia.get(mid, set())
    return len(found & q.evidence) / len(q.evidence)


def recall_within(q: Question, ranked: list[str], budget: int) -> float:
    """Evidence covered by the results whose contents, in order, fit in `budget` tokens."""
    found: set[str] = set()
    used = 0
    for mid in ranked:
        used += q.sample.tokens.get(mid, 0)
        if used > budget:
            break
        found |= q.sample.memory_dia.get(mid, set())
    return len(found & q.evidence) / len(q.evidence)


def mean_recall(questions: list[Question], ranked: dict[int, list[str]], k: int) -> float:
    return sum(recall_at(q, ranked[q.index], k) for q in questions) / max(1, len(questions))


def mean_recall_within(questions: list[Question], ranked: dict[int, list[str]], budget: int) -> float:
    return sum(recall_within(q, ranked[q.index], budget) for q in questions) / max(1, len(questions))


def hit_rate(questions: list[Question], ranked: dict[int, list[str]], k: int | None = None,
             budget: int | None = None) -> float:
    """hit@k (or within `budget` tokens): the share of questions with at least one evidence turn found."""
    hits = sum(1 for q in questions
               if (recall_at(q, ranked[q.index], k) if k is not None
                   else recall_within(q, ranked[q.index], budget or 0)) > 0)
    return hits / max(1, len(questions))


def fit(questions: list[Question], split: str) -> dict[str, Any]:
    """Grid search of RRF weights and k by R@10 on one half of the questions, reported on the other half."""
    train = [q for q in questions if (q.index % 2 == 0) == (split == "even")]
    test = [q for q in questions if q not in train]
    grid = {"dense": (1.0,), "lexical": (0.0, 0.5, 1.0, 1.5, 2.0), "graph": (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0),
            "time": (0.0, 0.5, 1.0), "k": (2.0, 3.0, 5.0, 10.0, 20.0, 60.0)}
    best: tuple[float, dict[str, float]] | None = None
    for lex, gr, tm, k in itertools.product(grid["lexical"], grid["graph"], grid["time"], grid["k"]):
        weights = {"dense": 1.0, "lexical": lex, "graph": gr, "time": tm}
        ranked = {q.index: rrf(retriever_lists(q), weights, k) for q in train}
        score = mean_recall(train, ranked, 10)
        if best is None or score > best[0] + 1e-9:
            best = (score, {**weights, "k": k})
    assert best is not None
    params = best[1]
    weights = {r: params[r] for r in RETRIEVERS}
    held = {q.index: rrf(retriever_lists(q), weights, params["k"]) for q in test}
    return {"params": params, "train_questions": len(train), "train_r10": round(best[0], 4),
            "test_questions": len(test), "test_r10": round(mean_recall(test, held, 10), 4)}


def retriever_lists(q: Question) -> dict[str, list[str]]:
    return {r: q.lists.get(r, []) for r in RETRIEVERS}


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------


def rankings(questions: list[Question], weights: dict[str, float], k: float,
             variants: tuple[str, ...] = VARIANTS) -> dict[str, dict[int, list[str]]]:
    out: dict[str, dict[int, list[str]]] = {v: {q.index: q.lists.get(v, []) for q in questions}
                                            for v in ("dense", "lexical", "graph", "fused", "collapsed")
                                            if v in variants}
    if not set(RETRIEVERS) <= set(variants):
        return out  # the offline fusions need every retriever's list
    out["fused-replay"] = {q.index: rrf(retriever_lists(q), weights, k) for q in questions}
    # the same fusion without the graph: what the second store adds
    out["fused-no-graph"] = {q.index: rrf(retriever_lists(q), {**weights, "graph": 0.0}, k) for q in questions}
    out["interleave"] = {q.index: interleave(q.lists) for q in questions}
    return out


def table(questions: list[Question], ranked: dict[str, dict[int, list[str]]]) -> tuple[str, list[dict[str, Any]]]:
    header = (f"{'category':<16}{'n':>4}  {'variant':<13}" + "".join(f"{'R@' + str(k):>7}" for k in KS)
              + "".join(f"{'R@' + str(b) + 't':>9}" for b in TOKEN_BUDGETS)
              + "".join(f"{'hit@' + str(k):>8}" for k in HIT_KS) + f"{'hit@1024t':>10}")
    lines = [header, "-" * len(header)]
    rows: list[dict[str, Any]] = []
    for category in [*sorted({q.category for q in questions}), None]:
        subset = [q for q in questions if category is None or q.category == category]
        label = "all" if category is None else f"{category} {CATEGORY_NAMES.get(category, '?')}"
        for i, (variant, lists) in enumerate(ranked.items()):
            values = {k: mean_recall(subset, lists, k) for k in KS}
            within = {b: mean_recall_within(subset, lists, b) for b in TOKEN_BUDGETS}
            hits = {k: hit_rate(subset, lists, k=k) for k in HIT_KS}
            hit_tokens = hit_rate(subset, lists, budget=1024)
            lines.append(f"{label if i == 0 else '':<16}{len(subset) if i == 0 else '':>4}  {variant:<13}"
                         + "".join(f"{values[k]:>7.3f}" for k in KS) + "".join(f"{within[b]:>9.3f}"
                                                                             for b in TOKEN_BUDGETS)
                         + "".join(f"{hits[k]:>8.3f}" for k in HIT_KS) + f"{hit_tokens:>10.3f}")
            rows.append({"category": category if category is not None else "all", "variant": variant,
                         "n": len(subset), **{f"recall@{k}": round(values[k], 4) for k in KS},
                         **{f"recall@{b}t": round(within[b], 4) for b in TOKEN_BUDGETS},
                         **{f"hit@{k}": round(hits[k], 4) for k in HIT_KS}, "hit@1024t": round(hit_tokens, 4)})
    return "\n".join(lines), rows


async def main(args: argparse.Namespace) -> int:
    if args.smoke:
        return await smoke(args)
    return (await bench(args))[0]


async def bench(args: argparse.Namespace) -> tuple[int, list[dict[str, Any]]]:
    """The run against --url: (exit status, the table's rows; none when it stopped before the queries)."""
    prefix = args.user_prefix or f"locomo-{uuid.uuid4().hex[:8]}"
    try:
        samples = load_samples(Path(args.data), prefix)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot read {args.data}: {exc}")
        return 2, []
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=args.url, timeout=120.0, limits=limits) as client:
        try:
            health = await client.get("/health")
        except httpx.HTTPError as exc:
            print(f"error: {args.url}/health unreachable ({type(exc).__name__}: {exc}); is the service running?")
            return 1, []
        if health.status_code != 200:
            print(f"error: {args.url}/health answered {health.status_code}: {health.text[:300]}")
            return 1, []
        info = health.json()
        turns = sum(len(s.turns) for s in samples)
        print(f"target {args.url}  embedder={info.get('embedder')}  ingest={args.ingest}  samples={len(samples)}  "
              f"turns={turns}  users={prefix}-*")
        t0 = time.perf_counter()
        if args.skip_ingest:
            problems = await read_back(client, samples, args.ingest)
        else:
            problems = await ingest(client, samples, args.ingest, args.concurrency, args.timeout)
        mapped = sum(len(s.memory_dia) for s in samples)
        print(f"{'read back' if args.skip_ingest else 'ingested'} {turns} turns as {mapped} memories in "
              f"{time.perf_counter() - t0:.1f}s")
        if problems:
            for p in problems[:10]:
                print(f"  ingestion problem: {p}")
            print(f"error: {len(problems)} ingestion problem(s); no figures")
            return 1, []
        questions, stats = questions_of(samples)
        t0 = time.perf_counter()
        query_problems = await run_queries(client, questions, args.concurrency, args.variants)
        print(f"searched {len(questions)} questions x {len(args.variants)} variants in {time.perf_counter() - t0:.1f}s"
              f"  (skipped: {stats['skipped_no_evidence']} without evidence or adversarial; evidence ids naming no "
              f"turn: {stats['dropped_evidence_ids']})")
    served = {r: float(args.weights.get(r, 0.0)) for r in RETRIEVERS}
    ranked = rankings(questions, served, float(args.weights.get("k", 60.0)), args.variants)
    text, rows = table(questions, ranked)
    print()
    print(text)
    report: dict[str, Any] = {"ingest": args.ingest, "questions": len(questions), "stats": stats, "rows": rows,
                              "problems": query_problems, "memories": mapped}
    if args.fit and set(RETRIEVERS) <= set(args.variants):
        report["fit"] = fit(questions, args.fit_split)
        print(f"\nfit ({args.fit_split} questions) -> {json.dumps(report['fit'])}")
    if args.json_out:
        write_json(args.json_out, report)
    for p in query_problems[:10]:
        print(f"  search problem: {p}")
    return 1 if query_problems else 0, rows


def smoke_ok(rows: list[dict[str, Any]], variants: tuple[str, ...]) -> bool:
    """Every variant has its `all` row, recall in 0-1 and rising with k, and the served fusion is the replayed one."""
    overall = {r["variant"]: r for r in rows if r["category"] == "all"}
    names = list(rankings([], {}, 60.0, variants))  # the variants the table shows
    if any(v not in overall or overall[v]["n"] < 1 for v in names):
        return False
    for v in names:
        values = [overall[v][f"recall@{k}"] for k in KS]
        within = [overall[v][f"recall@{b}t"] for b in TOKEN_BUDGETS]
        if not all(0.0 <= x <= 1.0 for x in values + within) or values != sorted(values) or within != sorted(within):
            return False
    if "fused-replay" in overall and any(overall["fused"][f"recall@{k}"] != overall["fused-replay"][f"recall@{k}"]
                                         for k in KS):
        return False
    return any(overall[v]["recall@20"] > 0 for v in names)


async def smoke(args: argparse.Namespace) -> int:
    """--smoke: the run on the shipped sample against a `python -m service` of its own on the test stack."""
    async def run(url: str, _work: Path) -> bool:
        args.url = url
        code, rows = await bench(args)
        return code == 0 and smoke_ok(rows, args.variants)

    return await smoke_against_service("recall", run)


def write_json(path: str, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=2), encoding="utf-8")


def parse_variants(text: str) -> tuple[str, ...]:
    chosen = tuple(v.strip() for v in text.split(",") if v.strip())
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown variant(s) {unknown}; choose from {','.join(VARIANTS)}")
    return chosen


def parse_weights(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        out[name.strip()] = float(value)
    return out


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help="LoCoMo-layout JSON file (required unless --smoke)")
    p.add_argument("--url", default="http://127.0.0.1:8199", help="base URL of a running service")
    p.add_argument("--ingest", choices=("turns", "sessions"), default="turns")
    p.add_argument("--user-prefix", default=None, help="user id prefix (default: locomo-<random>); one user per sample")
    p.add_argument("--skip-ingest", action="store_true",
                   help="write nothing: query the users of an earlier run (needs --user-prefix, same --ingest)")
    p.add_argument("--weights", type=parse_weights, default=parse_weights(
        "dense=1,lexical=1.5,graph=3,time=1,k=5"), help="the service's RRF weights and k, for fused-replay")
    p.add_argument("--variants", type=parse_variants, default=VARIANTS,
                   help=f"comma-separated subset of {','.join(VARIANTS)} to query (default: all; the offline "
                        "fusions and --fit need every retriever)")
    p.add_argument("--fit", action="store_true", help="grid-search RRF weights on half of the questions")
    p.add_argument("--fit-split", choices=("even", "odd"), default="even")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for ingestion tasks")
    p.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    p.add_argument("--smoke", action="store_true", help="a short check on the test stack: its own service, the shipped "
                                                        "sample (turns), then `smoke: OK` or exit 1")
    args = p.parse_args()
    if args.smoke:
        args.data, args.ingest, args.user_prefix, args.skip_ingest = str(SMOKE_DATA), "turns", None, False
        args.timeout = 120.0
    elif args.data is None:
        p.error("--data is required (unless --smoke)")
    if args.concurrency < 1 or args.timeout <= 0:
        p.error("--concurrency must be >= 1 and --timeout > 0")
    if args.skip_ingest and not args.user_prefix:
        p.error("--skip-ingest needs the --user-prefix of the run that ingested")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
