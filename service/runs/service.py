"""The reads of task traces: one run in order, listings, search, stats, lessons, and the runs beside a memory
search. The API side of their writes is intake.py, the worker side writes.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from service.ai.embeddings import Embedder
from service.core.embedding_models import DEFAULT_CALIBRATION
from service.core.errors import DependencyUnavailable, NotFound
from service.runs import lessons as lesson_rules
from service.runs.jobs import vector_model
from service.runs.schemas import (
    Lesson,
    ReasoningHit,
    RunHit,
    RunOut,
    RunPage,
    RunSearchRequest,
    RunSearchResponse,
    RunStats,
    RunSummary,
    SearchWithReasoning,
    StepOut,
    ToolCallOut,
)
from service.schemas.search import SearchResponse
from service.stores.tiers import RunFilter, RunReadStore

log = structlog.get_logger(__name__)

RRF_K = 60
MATCHED_CALLS = 5  # tool calls shown per search hit
REASONING_RUNS = 5  # prior runs beside a memory search (include: ["traces"])


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": row["id"], "task": row.get("task"), "session_id": row.get("session_id"),
        "project_id": row.get("project_id"), "agent_id": row.get("agent_id"),
        "outcome": row.get("outcome") or "open", "summary": row.get("summary"), "error_kind": row.get("error_kind"),
        "started_at": row.get("started_at"), "completed_at": row.get("completed_at"),
        "steps": int(row.get("steps") or 0), "tool_calls": int(row.get("tool_calls") or 0),
        "failed_tool_calls": int(row.get("failed_tool_calls") or 0),
    }


def _call_out(row: dict[str, Any]) -> ToolCallOut:
    return ToolCallOut(
        id=str(row["id"]), seq=row.get("seq"), tool=str(row.get("tool") or ""), arguments=row.get("arguments"),
        result=row.get("result"), status=str(row.get("status") or "ok"), error=row.get("error"),
        error_kind=row.get("error_kind"), duration_ms=row.get("duration_ms"),
        touched=[dict(t) for t in row.get("touched") or []], accepted_at=row.get("accepted_at"))


def _call_order(row: dict[str, Any]) -> tuple[bool, int, str, int, str]:
    """A step's tool calls: by their `seq` when given, else by acceptance (then position in the write)."""
    seq = row.get("seq")
    return (seq is None, int(seq or 0), str(row.get("accepted_at") or ""), int(row.get("n") or 0), str(row["id"]))


class RunService:
    """The reads of task traces: one run in order, listings, search, stats, lessons, the reasoning beside a search."""

    def __init__(self, graph: RunReadStore, embedder: Embedder, query_embedder: Embedder | None = None,
                 run_match: float = DEFAULT_CALIBRATION.run_match,
                 query_vector: Callable[[str], Awaitable[list[float]]] | None = None) -> None:
        """`run_match`: the cosine at or above which a run is a semantic match (the model's calibration);
        `query_vector`: the search's cached query embedding (service/search/searcher.py), so a search that brings
        its reasoning embeds its query once."""
        self.graph = graph
        self.embedder = embedder  # the write path's: the model the stored vectors are of
        self.query_embedder = query_embedder or embedder
        self.query_vector = query_vector or self.query_embedder.embed_query
        self.dense_min = (1.0 + run_match) / 2.0  # Neo4j's vector scores are (1 + cos) / 2

    async def get_run(self, run_id: str, user_id: str) -> RunOut:
        row = await self.graph.get_run(user_id, run_id)
        if row is None:
            raise NotFound(f"unknown run id '{run_id}'")
        by_step: dict[int, list[dict[str, Any]]] = {}
        for call in row["call_rows"]:
            by_step.setdefault(int(call["step_seq"]), []).append(call)
        steps = {int(s["seq"]): s for s in row["step_rows"]}
        trace = [StepOut(seq=seq, action=steps.get(seq, {}).get("action"), thought=steps.get(seq, {}).get("thought"),
                         tool_calls=[_call_out(c) for c in sorted(by_step.get(seq, []), key=_call_order)])
                 for seq in sorted(set(steps) | set(by_step))]
        return RunOut(user_id=user_id, trace=trace, **_summary(row))

    async def list_runs(self, user_id: str, session_id: str | None, project_id: str | None, limit: int,
                        cursor: str | None) -> RunPage:
        rows, next_cursor = await self.graph.list_runs(user_id, session_id, project_id, limit, cursor)
        return RunPage(items=[RunSummary(**_summary(r)) for r in rows], next_cursor=next_cursor)

    async def search(self, req: RunSearchRequest, user_id: str) -> RunSearchResponse:
        """Dense (task and summary vectors) and lexical (full text of the run and of its tool calls: tool,
        arguments, error, error kind) side by side, fused by reciprocal rank; the filters apply to both."""
        flt = RunFilter(user_id=user_id, project_id=req.project_id, outcome=req.outcome, tool=req.tool,
                        error_kind=req.error_kind)
        k = min(500, max(50, req.limit * 5))
        vector = await self.query_vector(req.query)
        dense, (lex_runs, lex_calls) = await asyncio.gather(
            self.graph.dense_runs(flt, vector, vector_model(self.embedder), k),
            self.graph.lexical_runs(flt, req.query, k))
        scores: dict[str, float] = {}
        signals: dict[str, dict[str, int]] = {}
        matched: dict[str, list[dict[str, Any]]] = {}

        def add(name: str, ids: list[str]) -> None:
            for rank, run_id in enumerate(dict.fromkeys(ids), start=1):
                scores[run_id] = scores.get(run_id, 0.0) + 1.0 / (RRF_K + rank)
                signals.setdefault(run_id, {})[name] = rank

        add("dense", [r for r, score in dense if score >= self.dense_min])
        add("lexical", [r for r, _ in lex_runs])
        add("tool_calls", [r for r, _, _ in lex_calls])
        for run_id, _, call in lex_calls:
            if len(matched.setdefault(run_id, [])) < MATCHED_CALLS:
                matched[run_id].append(call)
        top = sorted(scores, key=lambda r: (-scores[r], r))[: req.limit]
        rows = {r["id"]: r for r in await self.graph.run_summaries(user_id, top)}
        results = [RunHit(score=round(scores[r], 6), signals=signals[r],
                          matched_tool_calls=[_call_out(c) for c in matched.get(r, [])], **_summary(rows[r]))
                   for r in top if r in rows]
        return RunSearchResponse(results=results)

    async def warm_up(self) -> None:
        """Plan the lessons statement before the first context request (session-start has a tight budget); for a
        user id API keys cannot name (`_warm-up`), so no tenant's data is read. A failure is logged, never fatal."""
        try:
            await self.lessons("_warm-up", None)
        except Exception as exc:  # a warm-up only: the first context request reports for real
            log.warning("lessons_warm_up_failed", error=str(exc) or type(exc).__name__)

    async def lessons(self, user_id: str, project_id: str | None, session_id: str | None = None,
                      cap: int = lesson_rules.LESSONS) -> list[Lesson]:
        """Failed tool calls of earlier sessions and what came after them (service/runs/lessons.py). A graph
        outage gives none (logged): the memory context does not depend on Neo4j and must not fail with it."""
        try:
            return await lesson_rules.lessons(self.graph, user_id, project_id, session_id, cap)
        except DependencyUnavailable as exc:
            log.warning("lessons_unavailable", error=str(exc))
            return []

    async def reasoning(self, found: SearchResponse, query: str, user_id: str, project_id: str | None,
                        limit: int = REASONING_RUNS) -> SearchWithReasoning:
        """The search's answer with `reasoning`: runs that match the query (as /v1/runs/search ranks them) and
        runs whose tool calls touched an entity the returned memories mention; runs found both ways first."""
        by_query, by_entities = await asyncio.gather(
            self.search(RunSearchRequest(query=query, project_id=project_id, limit=limit), user_id),
            self.graph.runs_touching(user_id, [r.id for r in found.results], project_id, limit))
        hits: dict[str, ReasoningHit] = {
            h.run_id: ReasoningHit(**h.model_dump(), via=["query"]) for h in by_query.results}
        touching = {run_id: (names, calls) for run_id, names, calls in by_entities}
        rows = {r["id"]: r for r in await self.graph.run_summaries(user_id, [r for r in touching if r not in hits])}
        for run_id, (names, calls) in touching.items():
            if run_id in hits:
                hits[run_id].via.append("entities")
                hits[run_id].entities = names
            elif run_id in rows:
                hits[run_id] = ReasoningHit(score=0.0, via=["entities"], entities=names,
                                            matched_tool_calls=[_call_out(c) for c in calls], **_summary(rows[run_id]))
        order = sorted(hits.values(), key=lambda h: (-len(h.via), -h.score, -len(h.entities)))
        return SearchWithReasoning(**found.model_dump(), reasoning=order[:limit])

    async def stats(self, user_id: str, project_id: str | None) -> RunStats:
        s = await self.graph.run_stats(user_id, project_id)
        completed = int(s.get("completed") or 0)
        succeeded = int(s.get("succeeded") or 0)
        runs = int(s.get("runs") or 0)
        return RunStats(
            runs=runs, completed=completed, succeeded=succeeded, failed=int(s.get("failed") or 0),
            open=runs - completed, success_rate=round(succeeded / completed, 4) if completed else None,
            tool_calls=int(s.get("tool_calls") or 0), failed_tool_calls=int(s.get("failed_tool_calls") or 0),
            failures_by_tool=dict(s.get("failures_by_tool") or {}),
            failures_by_error_kind=dict(s.get("failures_by_error_kind") or {}))

