"""Retrieval-quality harness on conversations in the public LoCoMo JSON layout.

    .venv/bin/python scripts/bench/recall.py --data tests/data/locomo_sample.json --url http://127.0.0.1:8199 \
        [--mode vector|merged|both] [--json-out FILE]

Input: a list of samples, each with `conversation` (`speaker_a`, `speaker_b`, `session_<n>` lists of
turns `{speaker, dia_id, text}` and `session_<n>_date_time`) and `qa` items
`{question, answer, evidence: [dia_id], category}`.

1. Ingest: every turn becomes one memory through the public API, `POST /v1/memories/raw` with
   user `<prefix>-<sample>` (one user per sample), category `interaction`, content
   `"<speaker>: <text>"` (plus ` [shares a photo: <blip_caption>]` when the turn has one) and
   metadata `{dia_id, session, session_date_time, speaker, sample_id}`. Every task is polled until
   it is completed; the memory id in the task result maps the memory back to its dia_id(s)
   (identical turns of one user share a task and therefore a memory).
2. Query: every QA item with evidence goes through `POST /v1/search` for its sample's user
   (`--limit`, default 20).
   - merged: the results of a `limit=20` request in the order the API returns them. A vector
     result covers its memory's dia_id(s); a graph result covers the dia_ids of all its
     `memory_ids`.
   - vector: the first 20 results with `source == "vector"` of a `limit=40` request. The API
     interleaves vector and graph results and truncates to `limit`, so in a `limit=20` answer
     graph facts could push vector hits 11-20 out; with `limit=40` the vector store returns its
     top 40 and the first 20 of them always survive the merge, which is exactly the vector-only
     top 20.
   The API drops a graph fact when one of its supporting memories is among the vector results,
   so for a user with no more memories than `limit` merged equals vector by construction (every
   memory is a vector result). `--limit 5` shows the merge on small samples (recall@1/5 only).
3. Score: recall@k of a question = |evidence turns covered by the top k| / |evidence turns|;
   the table shows its mean per QA category (LoCoMo: 1 multi-hop, 2 temporal, 3 open-domain,
   4 single-hop, 5 adversarial) and over all questions. Evidence ids that name no turn of the
   conversation are dropped (and counted); QA items left without evidence are skipped.

Exit status: 0 when every turn was ingested and every search answered 200 (and, for merged
figures, none came back degraded); 1 otherwise; 2 for unusable input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

KS = (1, 5, 10, 20)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
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


@dataclass
class Scores:
    """Per category: the recall@k of every question, per mode."""

    ks: tuple[int, ...] = KS
    per_question: dict[tuple[str, int], list[dict[int, float]]] = field(default_factory=dict)

    def add(self, mode: str, category: int, recall: dict[int, float]) -> None:
        self.per_question.setdefault((mode, category), []).append(recall)

    def mean(self, mode: str, category: int | None) -> tuple[int, dict[int, float]]:
        rows = [
            r for (m, c), rs in self.per_question.items() if m == mode and (category is None or c == category)
            for r in rs
        ]
        if not rows:
            return 0, {k: 0.0 for k in self.ks}
        return len(rows), {k: sum(r[k] for r in rows) / len(rows) for k in self.ks}


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
                    date_time=conv.get(f"session_{n}_date_time"),
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


async def ingest(
    client: httpx.AsyncClient, samples: list[Sample], concurrency: int, timeout_s: float
) -> list[str]:
    """Write every turn and wait for every task; returns the problems (empty = all ingested)."""
    sem = asyncio.Semaphore(concurrency)
    problems: list[str] = []
    task_turns: dict[str, list[tuple[Sample, Turn]]] = {}

    async def submit(sample: Sample, turn: Turn) -> None:
        body = {
            "content": turn.content,
            "user_id": sample.user_id,
            "category": "interaction",
            "metadata": {
                "dia_id": turn.dia_id,
                "session": turn.session,
                "session_date_time": turn.date_time,
                "speaker": turn.speaker,
                "sample_id": sample.sample_id,
            },
        }
        async with sem:
            try:
                resp = await client.post("/v1/memories/raw", json=body)
            except httpx.HTTPError as exc:
                problems.append(f"{sample.sample_id} {turn.dia_id}: {type(exc).__name__}: {exc}")
                return
        if resp.status_code != 202:
            problems.append(f"{sample.sample_id} {turn.dia_id}: HTTP {resp.status_code}: {resp.text[:200]}")
            return
        task_turns.setdefault(resp.json()["task_id"], []).append((sample, turn))

    await asyncio.gather(*(submit(s, t) for s in samples for t in s.turns))

    async def poll(task_id: str) -> bool:
        async with sem:
            try:
                resp = await client.get(f"/v1/memories/status/{task_id}")
            except httpx.HTTPError:
                return False  # transient: next round
        if resp.status_code == 404:
            problems.append(f"task {task_id}: unknown or expired (404)")
            return True
        if resp.status_code != 200:
            return False
        body = resp.json()
        if body["status"] == "failed":
            problems.append(f"task {task_id}: failed: {body.get('error')}")
            return True
        if body["status"] != "completed":
            return False
        memories = (body.get("result") or {}).get("memories") or []
        if len(memories) != 1:
            problems.append(f"task {task_id}: expected one memory in the result, got {len(memories)}")
            return True
        for sample, turn in task_turns[task_id]:
            sample.memory_dia.setdefault(memories[0]["id"], set()).add(turn.dia_id)
        return True

    pending = list(task_turns)
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / POLL_INTERVAL) + 1):
        if not pending or time.monotonic() >= deadline:
            break
        # Tasks finish roughly in submission order: walk the pending ones in windows and end the
        # round at the first window where nothing finished, so thousands of pending turns do not
        # mean thousands of status requests every round.
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


# --------------------------------------------------------------------------------------------
# queries
# --------------------------------------------------------------------------------------------


def covered(results: list[dict[str, Any]], memory_dia: dict[str, set[str]]) -> list[set[str]]:
    """The dia_ids each result stands for, in result order."""
    out: list[set[str]] = []
    for r in results:
        if r.get("source") == "graph":
            ids: set[str] = set()
            for mid in r.get("memory_ids") or []:
                ids |= memory_dia.get(mid, set())
            out.append(ids)
        else:
            out.append(set(memory_dia.get(r["id"], set())))
    return out


def recall_at(per_result: list[set[str]], evidence: set[str], ks: tuple[int, ...]) -> dict[int, float]:
    recall: dict[int, float] = {}
    for k in ks:
        found: set[str] = set().union(*per_result[:k]) & evidence
        recall[k] = len(found) / len(evidence)
    return recall


async def run_queries(
    client: httpx.AsyncClient, samples: list[Sample], modes: list[str], concurrency: int, limit: int
) -> tuple[Scores, list[str], dict[str, int]]:
    scores = Scores(ks=tuple(k for k in KS if k <= limit))
    problems: list[str] = []
    stats = {"questions": 0, "skipped_no_evidence": 0, "dropped_evidence_ids": 0, "degraded": 0,
             "graph_results": 0, "questions_with_graph_results": 0}
    sem = asyncio.Semaphore(concurrency)

    async def search(user_id: str, question: str, limit: int) -> dict[str, Any] | None:
        async with sem:
            try:
                resp = await client.post("/v1/search", json={"query": question, "user_id": user_id, "limit": limit})
            except httpx.HTTPError as exc:
                problems.append(f"search {question[:60]!r}: {type(exc).__name__}: {exc}")
                return None
        if resp.status_code != 200:
            problems.append(f"search {question[:60]!r}: HTTP {resp.status_code}: {resp.text[:200]}")
            return None
        body: dict[str, Any] = resp.json()
        return body

    async def one(sample: Sample, item: dict[str, Any]) -> None:
        known = {t.dia_id for t in sample.turns}
        wanted = evidence_ids(item)
        evidence = {e for e in wanted if e in known}
        stats["dropped_evidence_ids"] += len(wanted) - len(evidence)
        if not evidence or not str(item.get("question") or "").strip():
            stats["skipped_no_evidence"] += 1
            return
        stats["questions"] += 1
        category = int(item.get("category") or 0)
        question = str(item["question"])[:2000]
        if "merged" in modes:
            body = await search(sample.user_id, question, limit)
            if body is not None:
                if "graph" in (body.get("degraded") or []):
                    stats["degraded"] += 1
                    problems.append(f"search {question[:60]!r}: degraded {body['degraded']}")
                graph = sum(1 for r in body["results"] if r.get("source") == "graph")
                stats["graph_results"] += graph
                stats["questions_with_graph_results"] += int(graph > 0)
                per_result = covered(body["results"], sample.memory_dia)
                scores.add("merged", category, recall_at(per_result, evidence, scores.ks))
        if "vector" in modes:
            body = await search(sample.user_id, question, min(100, 2 * limit))
            if body is not None:
                vector = [r for r in body["results"] if r.get("source") == "vector"][:limit]
                scores.add("vector", category, recall_at(covered(vector, sample.memory_dia), evidence, scores.ks))

    await asyncio.gather(*(one(s, item) for s in samples for item in s.qa))
    return scores, problems, stats


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------


def table(scores: Scores, modes: list[str]) -> tuple[str, list[dict[str, Any]]]:
    categories = sorted({c for (_, c) in scores.per_question})
    header = f"{'category':<16}{'n':>4}  {'mode':<7}" + "".join(f"{'R@' + str(k):>7}" for k in scores.ks)
    lines = [header, "-" * len(header)]
    rows: list[dict[str, Any]] = []
    for category in [*categories, None]:
        label = "all" if category is None else f"{category} {CATEGORY_NAMES.get(category, '?')}"
        for i, mode in enumerate(modes):
            n, mean = scores.mean(mode, category)
            lines.append(
                f"{label if i == 0 else '':<16}{n if i == 0 else '':>4}  {mode:<7}"
                + "".join(f"{mean[k]:>7.3f}" for k in scores.ks)
            )
            rows.append({"category": category if category is not None else "all", "mode": mode, "n": n,
                         **{f"recall@{k}": round(mean[k], 4) for k in scores.ks}})
    return "\n".join(lines), rows


def write_json(path: str, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=2), encoding="utf-8")


async def main(args: argparse.Namespace) -> int:
    prefix = args.user_prefix or f"locomo-{uuid.uuid4().hex[:8]}"
    try:
        samples = load_samples(Path(args.data), prefix)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot read {args.data}: {exc}")
        return 2
    modes = ["vector", "merged"] if args.mode == "both" else [args.mode]
    turns = sum(len(s.turns) for s in samples)
    questions = sum(len(s.qa) for s in samples)
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=args.url, timeout=60.0, limits=limits) as client:
        try:
            health = await client.get("/health")
        except httpx.HTTPError as exc:
            print(f"error: {args.url}/health unreachable ({type(exc).__name__}: {exc}); is the service running?")
            return 1
        if health.status_code != 200:
            print(f"error: {args.url}/health answered {health.status_code}: {health.text[:300]}")
            return 1
        info = health.json()
        print(f"target {args.url}  embedder={info.get('embedder')}  samples={len(samples)}  turns={turns}  "
              f"qa={questions}  users={prefix}-*")

        t0 = time.perf_counter()
        problems = await ingest(client, samples, args.concurrency, args.timeout)
        mapped = sum(len(s.memory_dia) for s in samples)
        print(f"ingested {turns} turns as {mapped} memories in {time.perf_counter() - t0:.1f}s")
        if problems:
            for p in problems[:10]:
                print(f"  ingestion problem: {p}")
            print(f"error: {len(problems)} ingestion problem(s); no figures")
            return 1

        t0 = time.perf_counter()
        scores, query_problems, stats = await run_queries(client, samples, modes, args.concurrency, args.limit)
        print(f"searched {stats['questions']} questions x {len(modes)} mode(s) in {time.perf_counter() - t0:.1f}s  "
              f"(skipped without evidence: {stats['skipped_no_evidence']}, "
              f"evidence ids naming no turn: {stats['dropped_evidence_ids']})")
        if "merged" in modes:
            print(f"merged answers held {stats['graph_results']} graph result(s); "
                  f"{stats['questions_with_graph_results']} question(s) got at least one")

    text, rows = table(scores, modes)
    print()
    print(text)
    if args.json_out:
        write_json(args.json_out, {"modes": modes, "stats": stats, "rows": rows, "problems": query_problems})
    for p in query_problems[:10]:
        print(f"  search problem: {p}")
    return 1 if query_problems else 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="LoCoMo-layout JSON file")
    p.add_argument("--url", default="http://127.0.0.1:8199", help="base URL of a running service")
    p.add_argument("--mode", choices=("vector", "merged", "both"), default="both")
    p.add_argument("--user-prefix", default=None, help="user id prefix (default: locomo-<random>); one user per sample")
    p.add_argument("--limit", type=int, default=20,
                   help="search limit (1-50); recall@k is reported for k in 1,5,10,20 up to it")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for ingestion tasks")
    p.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    args = p.parse_args()
    if args.concurrency < 1 or args.timeout <= 0 or not 1 <= args.limit <= 50:
        p.error("--concurrency must be >= 1, --timeout > 0 and 1 <= --limit <= 50")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
