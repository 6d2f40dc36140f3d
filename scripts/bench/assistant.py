"""Retrieval on realistic personal-assistant histories, through the public API as an agent uses it.

    .venv/bin/python scripts/bench/assistant.py --url http://127.0.0.1:8199 \
        [--data scripts/bench/data/assistant_histories.json] [--user-prefix P [--skip-ingest]] [--limit 10] \
        [--json-out FILE] [--api-key KEY] [--verbose]

1. Ingest, one user `<prefix>-<history id>` per history (prefix random per run unless given): each session is
   one `POST /v1/memories` (the conversation path: its messages with `timestamp` = the session's date), polled on
   `GET /v1/memories/status/{task_id}` until completed or failed (at most --task-timeout seconds). The sessions of
   one history go in date order, each after the previous one completed (later sessions correct earlier ones);
   up to --concurrency histories at once. `--skip-ingest --user-prefix P` writes nothing and queries the users
   of an earlier run.
2. Query: every question is one `POST /v1/search` (`limit` --limit) for its history's user, the API's default
   search. A result answers when its `content` holds the answer substring (case-insensitive); it is stale when
   it holds the stale substring and not the answer.
3. Score: the share of questions answered at rank 1, within the top 3 and within the limit (hit@limit), MRR, and
   for questions with a stale value the share where the first answering result ranks above the first stale one
   (no stale result: outranked; no answering result: not). Per history, and with --verbose the misses.
   Questions the history cannot answer (`"answer": null`) are scored apart, on the relevance floor (what recall
   and a context with a query show: the results not `below_floor`): `empty` is the share of them with no result
   above the floor, `shown` the mean number of results above it; for the answered ones, `kept` is the share whose
   answer is among the results above the floor (hit@limit, less what the floor hides).
4. Replacements: every user's memories with their history (`GET /v1/memories?include_superseded=true`); a
   superseded memory is a right replacement when it holds one of its history's stale values and not the current
   one, else a wrong one (a true memory taken out of search). `replaced` counts the stale values that some
   superseded memory holds, of all the stale values.

`--smoke` (no other argument needed): starts its own `python -m service` on the test stack (TEST_REDIS_URL,
TEST_NEO4J_URI, TEST_NEO4J_DATABASE; hash embedder, offline extractor, a queue of its own; scripts/bench/procs.py),
runs the first SMOKE_HISTORIES histories of the bundled set (a copy in a temp dir) against it, stops it, then prints
`smoke: OK` when every session was ingested, every search answered and the figures are in 0-1, else `smoke: FAIL`
(exit status 1).

Exit status: 0 when every write completed and every search answered 200; 1 otherwise; 2 for unusable input.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # scripts.bench importable from a checkout

from scripts.bench.procs import smoke_against_service  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "assistant_histories.json"
POLL_INTERVAL = 0.25
SMOKE_HISTORIES = 2  # --smoke: the first histories of the bundled set
_ID_SAFE = re.compile(r"[^A-Za-z0-9_.:@-]")


@dataclass
class Question:
    history: str
    text: str
    answer: str | None  # None: the history cannot answer it
    stale: str | None
    answer_rank: int | None = None  # 1-based rank of the first answering result
    related: int = 0  # results above the relevance floor (not `below_floor`)
    answer_related: bool = False  # the first answering result is above the floor
    stale_rank: int | None = None  # 1-based rank of the first stale result
    top: list[str] = field(default_factory=list)  # contents of the first three results


@dataclass
class History:
    id: str
    user: str
    sessions: list[dict[str, Any]]
    questions: list[Question]


def load(path: Path, prefix: str) -> list[History]:
    """The histories of the data file; ValueError when its layout is not the expected one."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("histories"), list) or not data["histories"]:
        raise ValueError("expected {\"version\": 1, \"histories\": [...]}")
    out: list[History] = []
    for raw in data["histories"]:
        hid = str(raw["id"])
        sessions = sorted(raw["sessions"], key=lambda s: str(s["date"]))
        if not sessions or any(not s["messages"] for s in sessions):
            raise ValueError(f"{hid}: a history needs sessions with messages")
        questions = [Question(hid, str(q["question"]), None if q["answer"] is None else str(q["answer"]),
                              q.get("stale") or None) for q in raw["questions"]]
        if any(not q.text.strip() or (q.answer is not None and not q.answer.strip()) for q in questions):
            raise ValueError(f"{hid}: a question without text, or with an empty answer")
        out.append(History(hid, _ID_SAFE.sub("-", f"{prefix}-{hid}")[:128], sessions, questions))
    return out


def ranks(contents: list[str], answer: str, stale: str | None) -> tuple[int | None, int | None]:
    """(rank of the first result holding `answer`, rank of the first holding `stale` but not `answer`), 1-based,
    case-insensitive; None where no result does."""
    answer_rank: int | None = None
    stale_rank: int | None = None
    for rank, content in enumerate(contents, start=1):
        text = content.lower()
        holds = answer.lower() in text
        if holds and answer_rank is None:
            answer_rank = rank
        if stale and not holds and stale.lower() in text and stale_rank is None:
            stale_rank = rank
    return answer_rank, stale_rank


def current_first(answer_rank: int | None, stale_rank: int | None) -> bool:
    """The current value outranks the stale one: an answer, and no stale result above it."""
    return answer_rank is not None and (stale_rank is None or answer_rank < stale_rank)


def summary(questions: list[Question]) -> dict[str, Any]:
    """rank1, top3, hit (within the limit), mrr, and current_over_stale over the questions with a stale value; the
    relevance floor's figures (docstring, step 3): kept over the answered questions, empty and shown over those the
    history cannot answer."""
    unanswerable = [q for q in questions if q.answer is None]
    questions = [q for q in questions if q.answer is not None]
    n = max(1, len(questions))
    found = [q.answer_rank for q in questions if q.answer_rank is not None]
    corrections = [q for q in questions if q.stale]
    return {
        "questions": len(questions),
        "rank1": sum(r == 1 for r in found) / n,
        "top3": sum(r <= 3 for r in found) / n,
        "hit": len(found) / n,
        "mrr": sum(1 / r for r in found) / n,
        "corrections": len(corrections),
        "current_over_stale": (sum(current_first(q.answer_rank, q.stale_rank) for q in corrections)
                               / len(corrections) if corrections else None),
        "kept": sum(q.answer_related for q in questions) / n,
        "unanswerable": len(unanswerable),
        "empty": sum(q.related == 0 for q in unanswerable) / len(unanswerable) if unanswerable else None,
        "shown": sum(q.related for q in unanswerable) / len(unanswerable) if unanswerable else None,
    }


async def wait_task(client: httpx.AsyncClient, task_id: str, timeout_s: float) -> str | None:
    """Poll a task until it completes; a problem text when it failed, vanished or took too long."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / POLL_INTERVAL) + 1):  # bounded in count as well as time
        resp: httpx.Response | None = None
        with contextlib.suppress(httpx.HTTPError):  # transient: try again
            resp = await client.get(f"/v1/memories/status/{task_id}")
        if resp is not None and resp.status_code == 200:
            status = resp.json()
            if status["status"] == "completed":
                return None
            if status["status"] == "failed":
                return f"task {task_id} failed: {status.get('error')}"
        elif resp is not None and resp.status_code == 404:
            return f"task {task_id}: unknown or expired (404)"
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(POLL_INTERVAL)
    return f"task {task_id}: not finished after {timeout_s:.0f}s"


async def ingest(client: httpx.AsyncClient, history: History, sem: asyncio.Semaphore,
                 timeout_s: float) -> list[str]:
    """Post the history's sessions in date order, each after the previous one completed."""
    async with sem:
        for session in history.sessions:
            messages = [{"role": m["role"], "content": m["content"], "timestamp": session["date"]}
                        for m in session["messages"]]
            try:
                resp = await client.post("/v1/memories", json={"messages": messages, "user_id": history.user})
            except httpx.HTTPError as exc:
                return [f"{history.id} {session['date']}: {type(exc).__name__}: {exc}"]
            if resp.status_code != 202:
                return [f"{history.id} {session['date']}: HTTP {resp.status_code}: {resp.text[:200]}"]
            if (problem := await wait_task(client, resp.json()["task_id"], timeout_s)) is not None:
                return [f"{history.id} {session['date']}: {problem}"]
    return []


async def ask(client: httpx.AsyncClient, q: Question, user: str, limit: int, sem: asyncio.Semaphore) -> str | None:
    """One search; fills the question's ranks. A problem text when the search did not answer 200."""
    async with sem:
        try:
            resp = await client.post("/v1/search", json={"query": q.text, "user_id": user, "limit": limit})
        except httpx.HTTPError as exc:
            return f"search {q.text!r}: {type(exc).__name__}: {exc}"
    if resp.status_code != 200:
        return f"search {q.text!r}: HTTP {resp.status_code}: {resp.text[:200]}"
    found = resp.json()["results"]
    contents = [str(r.get("content") or "") for r in found]
    q.related = sum(not r.get("below_floor") for r in found)
    q.top = contents[:3]
    if q.answer is not None:
        q.answer_rank, q.stale_rank = ranks(contents, q.answer, q.stale)
        q.answer_related = q.answer_rank is not None and not found[q.answer_rank - 1].get("below_floor")
    return None


async def replacements(client: httpx.AsyncClient, histories: list[History]) -> dict[str, Any]:
    """Right and wrong supersedes over the users' memories (step 4 of the docstring)."""
    right = wrong = 0
    replaced: set[tuple[str, str]] = set()
    stale_total = 0
    for h in histories:
        stale = {q.stale.casefold(): (q.answer or "").casefold() for q in h.questions if q.stale}
        stale_total += len(stale)
        cursor: str | None = None
        for _ in range(50):  # pages of 100: far more than a history holds
            params: dict[str, Any] = {"user_id": h.user, "include_superseded": "true", "limit": 100}
            if cursor:
                params["cursor"] = cursor
            page = (await client.get("/v1/memories", params=params)).json()
            for m in page["memories"]:
                if not m.get("superseded_by"):
                    continue
                text = m["content"].casefold()
                held = [s for s, answer in stale.items() if s in text and answer not in text]
                right += bool(held)
                wrong += not held
                replaced.update((h.id, s) for s in held)
            cursor = page.get("next_cursor")
            if not cursor:
                break
    return {"right": right, "wrong": wrong, "stale_values": stale_total, "replaced": len(replaced)}


def fmt(value: float | None) -> str:
    return f"{value:>8.3f}" if value is not None else f"{'-':>8}"


def table(histories: list[History], limit: int) -> str:
    header = (f"{'history':<26}{'n':>4}{'rank1':>8}{'top3':>8}{'hit@' + str(limit):>8}{'MRR':>8}"
              f"{'stale n':>8}{'cur>old':>8}{'kept':>8}{'none n':>8}{'empty':>8}{'shown':>8}")
    lines = [header, "-" * len(header)]
    rows = [(h.id, h.questions) for h in histories] + [("all", [q for h in histories for q in h.questions])]
    for i, (name, questions) in enumerate(rows):
        if i == len(rows) - 1:
            lines.append("-" * len(header))
        s = summary(questions)
        lines.append(f"{name:<26}{s['questions']:>4}{fmt(s['rank1'])}{fmt(s['top3'])}{fmt(s['hit'])}"
                     f"{fmt(s['mrr'])}{s['corrections']:>8}{fmt(s['current_over_stale'])}{fmt(s['kept'])}"
                     f"{s['unanswerable']:>8}{fmt(s['empty'])}{fmt(s['shown'])}")
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> int:
    if args.smoke:
        return await smoke(args)
    return (await bench(args))[0]


async def bench(args: argparse.Namespace) -> tuple[int, list[History]]:
    """The run against --url: (exit status, the histories with their questions scored; none when it stopped before
    the queries)."""
    prefix = args.user_prefix or f"assistant-{uuid.uuid4().hex[:8]}"
    try:
        histories = load(Path(args.data), prefix)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot read {args.data}: {exc}")
        return 2, []
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    async with httpx.AsyncClient(base_url=args.url, timeout=60.0, headers=headers) as client:
        try:
            health = await client.get("/health")
        except httpx.HTTPError as exc:
            print(f"error: {args.url}/health unreachable ({type(exc).__name__}: {exc}); is the service running?")
            return 1, []
        if health.status_code != 200:
            print(f"error: {args.url}/health answered {health.status_code}: {health.text[:300]}")
            return 1, []
        sessions = sum(len(h.sessions) for h in histories)
        questions = [q for h in histories for q in h.questions]
        print(f"target {args.url}  histories={len(histories)}  sessions={sessions}  questions={len(questions)}  "
              f"users={prefix}-*")
        problems: list[str] = []
        ingest_s = 0.0
        if not args.skip_ingest:
            t0 = time.perf_counter()
            sem = asyncio.Semaphore(args.concurrency)
            for found in await asyncio.gather(*(ingest(client, h, sem, args.task_timeout) for h in histories)):
                problems += found
            ingest_s = time.perf_counter() - t0
            print(f"ingested {sessions} sessions in {ingest_s:.1f}s")
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(2 * args.concurrency)
        users = {h.id: h.user for h in histories}
        answers = await asyncio.gather(*(ask(client, q, users[q.history], args.limit, sem) for q in questions))
        problems += [p for p in answers if p is not None]
        query_s = time.perf_counter() - t0
        print(f"searched {len(questions)} questions in {query_s:.1f}s")
        supersedes = await replacements(client, histories)
        print(f"superseded: {supersedes['right']} right, {supersedes['wrong']} wrong; {supersedes['replaced']} of "
              f"{supersedes['stale_values']} stale values replaced\n")
    print(table(histories, args.limit))
    misses = [q for q in questions if q.answer is not None
              and (q.answer_rank != 1 or not current_first(q.answer_rank, q.stale_rank))]
    if args.verbose:
        print(f"\nmisses (answer not first, or a stale value above it): {len(misses)}")
        for q in misses:
            print(f"- [{q.history}] {q.text}  answer={q.answer!r} rank={q.answer_rank} stale={q.stale!r} "
                  f"stale_rank={q.stale_rank}")
            for i, content in enumerate(q.top, start=1):
                print(f"    {i}. {' '.join(content.split())[:160]}")
    for p in problems[:20]:
        print(f"  problem: {p}")
    if args.json_out:
        report = {"url": args.url, "user_prefix": prefix, "limit": args.limit, "ingest_s": round(ingest_s, 2),
                  "query_s": round(query_s, 2), "overall": summary(questions), "replacements": supersedes,
                  "histories": {h.id: summary(h.questions) for h in histories},
                  "questions": [{"history": q.history, "question": q.text, "answer": q.answer, "stale": q.stale,
                                 "answer_rank": q.answer_rank, "stale_rank": q.stale_rank, "top3": q.top}
                                for q in questions],
                  "problems": problems}
        write_json(args.json_out, report)
    return 1 if problems else 0, histories


def smoke_ok(histories: list[History]) -> bool:
    """Every history searched, its figures in 0-1."""
    questions = [q for h in histories for q in h.questions]
    s = summary(questions)
    shares = [s[k] for k in ("rank1", "top3", "hit", "mrr", "current_over_stale", "kept", "empty") if s[k] is not None]
    return (len(histories) == SMOKE_HISTORIES and s["questions"] > 0 and all(0.0 <= v <= 1.0 for v in shares)
            and s["rank1"] <= s["top3"] <= s["hit"] and all(q.answer_rank is None or q.answer_rank >= 1
                                                            for q in questions))


def smoke_data(path: Path, work: Path) -> str:
    """A copy of the data file in `work` with its first SMOKE_HISTORIES histories."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data["histories"] = data["histories"][:SMOKE_HISTORIES]
    out = work / "histories.json"
    write_json(str(out), data)
    return str(out)


async def smoke(args: argparse.Namespace) -> int:
    """--smoke: the first histories against a `python -m service` of its own on the test stack, then the verdict."""
    async def run(url: str, work: Path) -> bool:
        args.data, args.url = smoke_data(Path(args.data), work), url
        code, histories = await bench(args)
        return code == 0 and smoke_ok(histories)

    return await smoke_against_service("assistant", run)


def write_json(path: str, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=2), encoding="utf-8")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8199", help="base URL of a running service")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="histories JSON (default: the bundled set)")
    p.add_argument("--user-prefix", default=None, help="user id prefix (default: assistant-<random>)")
    p.add_argument("--skip-ingest", action="store_true", help="write nothing: query the users of an earlier run")
    p.add_argument("--limit", type=int, default=10, help="results per search (1-100)")
    p.add_argument("--concurrency", type=int, default=4, help="histories ingested at once")
    p.add_argument("--task-timeout", type=float, default=120.0, help="seconds to wait for one write task")
    p.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer <key>'")
    p.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    p.add_argument("--verbose", action="store_true", help="list the misses with their top-3 contents")
    p.add_argument("--smoke", action="store_true", help="a short check on the test stack: its own service, the first "
                                                        f"{SMOKE_HISTORIES} histories, then `smoke: OK` or exit 1")
    args = p.parse_args()
    if args.smoke:
        args.data, args.user_prefix, args.skip_ingest, args.api_key = str(DEFAULT_DATA), None, False, None
        args.limit, args.task_timeout, args.json_out = 10, 60.0, None
    if not 1 <= args.limit <= 100 or args.concurrency < 1 or args.task_timeout <= 0:
        p.error("--limit must be 1-100, --concurrency >= 1 and --task-timeout > 0")
    if args.skip_ingest and not args.user_prefix:
        p.error("--skip-ingest needs the --user-prefix of the run that ingested")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
