"""The reads of task traces in Neo4j: one run with its steps and tool calls, listings, dense and lexical search,
the runs whose tool calls touched what memories mention, lessons, stats (`RunReads`); the writes and the
schema are in runs.py."""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import MAX_PAGE_LIMIT, RUN_FT_GROUP, check_id, clamp, ft_key, run_uid
from service.stores.neo4j.search import lucene_query, lucene_terms
from service.stores.tiers import RunFilter

MAX_RUN_SCAN = 20_000  # runs of one user a dense search compares (newest first)
LESSON_WINDOW = 500  # the newest runs of a user that lessons look among

RUN_PROPS: LiteralString = """r{.id, .user_id, .task, .project_id, .session_id, .agent_id, .outcome, .summary,
    .error_kind, .started_at, .completed_at, .created_at,
    steps: COUNT { (r)-[:HAS_STEP]->(:Step) },
    tool_calls: COUNT { (r)-[:HAS_STEP]->(:Step)-[:CALLED]->(:ToolCall) },
    failed_tool_calls: COUNT { (r)-[:HAS_STEP]->(:Step)-[:CALLED]->(:ToolCall {status: 'error'}) }}"""

GET_RUN: LiteralString = "MATCH (r:Run {uid: $uid}) WHERE r.user_id = $user_id AND r.deleted_at IS NULL RETURN " \
    + RUN_PROPS + " AS run"

GET_STEPS: LiteralString = """
MATCH (s:Step {run_uid: $uid}) WHERE s.user_id = $user_id
RETURN s{.seq, .action, .thought} AS step
"""

CALL_PROPS: LiteralString = """t{.id, .seq, .n, .tool, .arguments, .result, .status, .error, .error_kind,
    .duration_ms, .accepted_at, step_seq: s.seq,
    touched: [(t)-[:TOUCHED]->(e:Entity) | e{.id, .name, .type}]}"""

GET_CALLS: LiteralString = """
MATCH (s:Step)-[:CALLED]->(t:ToolCall {run_uid: $uid}) WHERE t.user_id = $user_id
RETURN """ + CALL_PROPS + " AS call"

LIST_RUNS: LiteralString = """
MATCH (r:Run) WHERE r.user_id = $user_id AND r.deleted_at IS NULL
  AND ($session_id IS NULL OR r.session_id = $session_id) AND ($project_id IS NULL OR r.project_id = $project_id)
  AND ($cursor = '' OR r.created_at + '|' + r.id < $cursor)
WITH r ORDER BY r.created_at DESC, r.id DESC LIMIT $limit
RETURN """ + RUN_PROPS + " AS run"

SUMMARIES: LiteralString = """
UNWIND $uids AS uid
MATCH (r:Run {uid: uid}) WHERE r.user_id = $user_id AND r.deleted_at IS NULL
RETURN """ + RUN_PROPS + " AS run"

# The filters every search statement applies to its run `r` (parameters: user_id, project_id, outcome, tool,
# error_kind).
FILTER: LiteralString = """r.user_id = $user_id AND r.deleted_at IS NULL
  AND ($project_id IS NULL OR r.project_id IS NULL OR r.project_id = $project_id)
  AND ($outcome IS NULL OR coalesce(r.outcome, 'open') = $outcome)
  AND ($tool IS NULL OR EXISTS { (r)-[:HAS_STEP]->(:Step)-[:CALLED]->(x:ToolCall) WHERE toLower(x.tool) = $tool })
  AND ($error_kind IS NULL OR r.error_kind = $error_kind
       OR EXISTS { (r)-[:HAS_STEP]->(:Step)-[:CALLED]->(x:ToolCall) WHERE x.error_kind = $error_kind })"""

DENSE: LiteralString = """
MATCH (r:Run) WHERE """ + FILTER + """ AND r.vec_model = $model
WITH r ORDER BY r.created_at DESC LIMIT $scan
WITH r, [v IN [r.task_vec, r.summary_vec] WHERE v IS NOT NULL AND size(v) = size($vec)
         | vector.similarity.cosine(v, $vec)] AS sims
WHERE size(sims) > 0
WITH r, reduce(best = 0.0, x IN sims | CASE WHEN x > best THEN x ELSE best END) AS score
ORDER BY score DESC, r.id LIMIT $k
RETURN r.id AS id, score
"""

LEXICAL_RUNS: LiteralString = """
CALL db.index.fulltext.queryNodes('run_text', $lucene, {limit: $k}) YIELD node AS r, score
WITH r, score WHERE """ + FILTER + """
RETURN r.id AS id, score ORDER BY score DESC, id
"""

LEXICAL_CALLS: LiteralString = """
CALL db.index.fulltext.queryNodes('tool_call_text', $lucene, {limit: $k}) YIELD node AS t, score
MATCH (r:Run)-[:HAS_STEP]->(s:Step)-[:CALLED]->(t)
WITH r, s, t, score WHERE """ + FILTER + """
RETURN r.id AS id, score, """ + CALL_PROPS + """ AS call ORDER BY score DESC, id
"""

# Runs whose tool calls touched an entity the given memories mention (or an entity merged into one of them).
RUNS_TOUCHING: LiteralString = """
MATCH (m:Memory)-[:MENTIONS]->(e:Entity) WHERE m.id IN $memory_ids AND m.user_id = $user_id
WITH DISTINCT e
UNWIND [e] + COLLECT { MATCH (y:Entity {merged_into: e.id}) RETURN y } AS x
MATCH (r:Run)-[:HAS_STEP]->(s:Step)-[:CALLED]->(t:ToolCall)-[:TOUCHED]->(x)
WHERE r.user_id = $user_id AND r.deleted_at IS NULL
  AND ($project_id IS NULL OR r.project_id IS NULL OR r.project_id = $project_id)
WITH r, collect(DISTINCT e.name) AS entities, collect(DISTINCT """ + CALL_PROPS + """) AS calls
RETURN r.id AS id, entities, calls[..5] AS calls ORDER BY size(entities) DESC, r.created_at DESC LIMIT $k
"""

# Lessons for a context: the user's recent runs (of other sessions) with a failed tool call, among the newest
# LESSON_WINDOW runs (a bounded cost whatever the user's history); per run its last failed call and the
# successful calls after it (what the agent did next), in order.
LESSONS: LiteralString = """
MATCH (r:Run) WHERE r.user_id = $user_id AND r.deleted_at IS NULL
  AND ($project_id IS NULL OR r.project_id IS NULL OR r.project_id = $project_id)
  AND ($session_id IS NULL OR r.session_id IS NULL OR r.session_id <> $session_id)
WITH r ORDER BY r.created_at DESC LIMIT $window
WITH r WHERE EXISTS { (r)-[:HAS_STEP]->(:Step)-[:CALLED]->(:ToolCall {status: 'error'}) }
WITH r LIMIT $scan
MATCH (r)-[:HAS_STEP]->(s:Step)-[:CALLED]->(t:ToolCall {status: 'error'})
WITH r, s, t ORDER BY s.seq DESC, coalesce(t.seq, -1) DESC, t.accepted_at DESC, coalesce(t.n, 0) DESC
WITH r, collect({seq: s.seq, call: t})[0] AS f
WITH r, f.seq AS fseq, f.call AS t
CALL (r, fseq, t) {
    MATCH (r)-[:HAS_STEP]->(s2:Step)-[:CALLED]->(ok:ToolCall {status: 'ok'})
    WHERE s2.seq > fseq
       OR (s2.seq = fseq AND CASE WHEN ok.seq IS NOT NULL AND t.seq IS NOT NULL THEN ok.seq > t.seq
                                  ELSE ok.accepted_at > t.accepted_at
                                       OR (ok.accepted_at = t.accepted_at AND coalesce(ok.n, 0) > coalesce(t.n, 0))
                             END)
    WITH s2, ok ORDER BY s2.seq, coalesce(ok.seq, 0), ok.accepted_at, coalesce(ok.n, 0) LIMIT $after
    RETURN collect(ok{.tool, .arguments, .result, step: s2.action}) AS after
}
RETURN r{.id, .task, .session_id, .project_id, .outcome, .summary, .error_kind, .created_at, .completed_at} AS run,
       t{.tool, .arguments, .error, .error_kind, step: fseq} AS failed, after
ORDER BY r.created_at DESC
"""

STATS: LiteralString = """
MATCH (r:Run) WHERE r.user_id = $user_id AND r.deleted_at IS NULL
  AND ($project_id IS NULL OR r.project_id = $project_id)
RETURN count(r) AS runs,
       count(r.completed_at) AS completed,
       sum(CASE WHEN r.outcome = 'success' THEN 1 ELSE 0 END) AS succeeded,
       sum(CASE WHEN r.outcome = 'failure' THEN 1 ELSE 0 END) AS failed
"""

FAILED_RUNS_BY_KIND: LiteralString = """
MATCH (r:Run) WHERE r.user_id = $user_id AND r.deleted_at IS NULL AND r.outcome = 'failure'
  AND ($project_id IS NULL OR r.project_id = $project_id)
RETURN coalesce(r.error_kind, 'unspecified') AS key, count(*) AS n ORDER BY n DESC, key LIMIT 100
"""

CALL_STATS: LiteralString = """
MATCH (r:Run)-[:HAS_STEP]->(:Step)-[:CALLED]->(t:ToolCall)
WHERE r.user_id = $user_id AND r.deleted_at IS NULL AND ($project_id IS NULL OR r.project_id = $project_id)
RETURN count(t) AS calls, sum(CASE WHEN t.status = 'error' THEN 1 ELSE 0 END) AS failed
"""

FAILED_CALLS_BY_TOOL: LiteralString = """
MATCH (r:Run)-[:HAS_STEP]->(:Step)-[:CALLED]->(t:ToolCall {status: 'error'})
WHERE r.user_id = $user_id AND r.deleted_at IS NULL AND ($project_id IS NULL OR r.project_id = $project_id)
RETURN t.tool AS key, count(*) AS n ORDER BY n DESC, key LIMIT 100
"""


class RunReads:
    """Run reads (`RunReadStore`)."""

    def __init__(self, executor: Neo4jExecutor) -> None:
        self._exec = executor

    async def get_run(self, user_id: str, run_id: str) -> dict[str, Any] | None:
        check_id(user_id, "user_id")
        uid = run_uid(user_id, run_id)

        async def run(tx: AsyncManagedTransaction) -> dict[str, Any] | None:
            rec = await (await tx.run(GET_RUN, uid=uid, user_id=user_id)).single()
            if rec is None:
                return None
            steps = [dict(r["step"]) for r in await (await tx.run(GET_STEPS, uid=uid, user_id=user_id)).data()]
            calls = [dict(r["call"]) for r in await (await tx.run(GET_CALLS, uid=uid, user_id=user_id)).data()]
            return {**dict(rec["run"]), "step_rows": steps, "call_rows": calls}

        found: dict[str, Any] | None = await self._exec.read(run)
        return found

    async def list_runs(self, user_id: str, session_id: str | None, project_id: str | None, limit: int,
                        cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        check_id(user_id, "user_id")
        n = clamp(limit, MAX_PAGE_LIMIT)

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(LIST_RUNS, user_id=user_id, session_id=session_id, project_id=project_id,
                                  cursor=cursor or "", limit=n + 1)
            return [dict(r["run"]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        more = len(rows) > n
        rows = rows[:n]
        return rows, (f"{rows[-1]['created_at']}|{rows[-1]['id']}" if more and rows else None)

    async def run_summaries(self, user_id: str, run_ids: list[str]) -> list[dict[str, Any]]:
        uids = [run_uid(user_id, r) for r in run_ids[:MAX_PAGE_LIMIT]]

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            return [dict(r["run"]) for r in await (await tx.run(SUMMARIES, uids=uids, user_id=user_id)).data()]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        return rows

    @staticmethod
    def _filter_params(flt: RunFilter) -> dict[str, Any]:
        return {"user_id": check_id(flt.user_id, "user_id"), "project_id": flt.project_id, "outcome": flt.outcome,
                "tool": flt.tool.casefold() if flt.tool else None, "error_kind": flt.error_kind}

    async def dense_runs(self, flt: RunFilter, vector: list[float], model: str, k: int) -> list[tuple[str, float]]:
        params = self._filter_params(flt)

        async def run(tx: AsyncManagedTransaction) -> list[tuple[str, float]]:
            result = await tx.run(DENSE, vec=vector, model=model, scan=MAX_RUN_SCAN, k=clamp(k, 500), **params)
            return [(str(r["id"]), float(r["score"])) for r in await result.data()]

        hits: list[tuple[str, float]] = await self._exec.read(run)
        return hits

    async def lexical_runs(self, flt: RunFilter, query: str, k: int
                           ) -> tuple[list[tuple[str, float]], list[tuple[str, float, dict[str, Any]]]]:
        terms = lucene_terms(query)
        if not terms:
            return [], []
        params = self._filter_params(flt)
        key = ft_key(flt.user_id, RUN_FT_GROUP)
        run_query = lucene_query([key], ("task", "summary", "error_kind"), terms)
        call_query = lucene_query([key], ("tool", "arguments", "error", "error_kind"), terms)

        async def run(tx: AsyncManagedTransaction) -> tuple[list[tuple[str, float]],
                                                             list[tuple[str, float, dict[str, Any]]]]:
            runs = [(str(r["id"]), float(r["score"])) for r in
                    await (await tx.run(LEXICAL_RUNS, lucene=run_query, k=clamp(k, 500), **params)).data()]
            calls = [(str(r["id"]), float(r["score"]), dict(r["call"])) for r in
                     await (await tx.run(LEXICAL_CALLS, lucene=call_query, k=clamp(k, 500), **params)).data()]
            return runs, calls

        found: tuple[list[tuple[str, float]], list[tuple[str, float, dict[str, Any]]]] = await self._exec.read(run)
        return found

    async def runs_touching(self, user_id: str, memory_ids: list[str], project_id: str | None, k: int
                            ) -> list[tuple[str, list[str], list[dict[str, Any]]]]:
        check_id(user_id, "user_id")
        if not memory_ids:
            return []

        async def run(tx: AsyncManagedTransaction) -> list[tuple[str, list[str], list[dict[str, Any]]]]:
            result = await tx.run(RUNS_TOUCHING, user_id=user_id, memory_ids=memory_ids[:MAX_PAGE_LIMIT],
                                  project_id=project_id, k=clamp(k, 100))
            return [(str(r["id"]), [str(n) for n in r["entities"]], [dict(c) for c in r["calls"]])
                    for r in await result.data()]

        found: list[tuple[str, list[str], list[dict[str, Any]]]] = await self._exec.read(run)
        return found

    async def lessons(self, user_id: str, project_id: str | None, session_id: str | None, scan: int,
                      after: int) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(LESSONS, user_id=user_id, project_id=project_id, session_id=session_id,
                                  window=LESSON_WINDOW, scan=clamp(scan, 200), after=clamp(after, 10))
            return [{"run": dict(r["run"]), "failed": dict(r["failed"]), "after": [dict(a) for a in r["after"]]}
                    for r in await result.data()]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        return rows

    async def run_stats(self, user_id: str, project_id: str | None) -> dict[str, Any]:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> dict[str, Any]:
            p: dict[str, Any] = {"user_id": user_id, "project_id": project_id}
            head = dict(await (await tx.run(STATS, **p)).single() or {})
            calls = dict(await (await tx.run(CALL_STATS, **p)).single() or {})
            by_kind = {str(r["key"]): int(r["n"]) for r in await (await tx.run(FAILED_RUNS_BY_KIND, **p)).data()}
            by_tool = {str(r["key"]): int(r["n"]) for r in await (await tx.run(FAILED_CALLS_BY_TOOL, **p)).data()}
            return {**head, "tool_calls": calls.get("calls") or 0, "failed_tool_calls": calls.get("failed") or 0,
                    "failures_by_tool": by_tool, "failures_by_error_kind": by_kind}

        stats: dict[str, Any] = await self._exec.read(run)
        return stats
