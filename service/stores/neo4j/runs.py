"""Task traces in Neo4j: `(:Run)-[:HAS_STEP]->(:Step)-[:CALLED]->(:ToolCall)-[:TOUCHED]->(:Entity)`.

Keys are derived from the tenant: a run's `uid` is uuid5(user, run id), a step's uid(run uid, seq), so parts
of one run written in any order MERGE into the same nodes, and one user can never address another's run.
A deleted run keeps a tombstone (`uid, user_id, id, deleted_at`) so that a part accepted before the delete and
run after it writes nothing. Mixed into Neo4jGraphStore (it uses its `_read`, `_write`, `_link_write`).
"""

from __future__ import annotations

import uuid
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.domain import ID_NAMESPACE
from service.stores.graph import GraphReport, NameRules, group_id
from service.stores.neo4j import cypher_writes, facts, resolution
from service.stores.neo4j.resolution import resolve
from service.stores.neo4j.rows import (
    MAX_ALIASES,
    MAX_PAGE_LIMIT,
    MAX_PREDICATE_CHARS,
    check_id,
    clamp,
    entity_id,
    entity_name,
    ft_key,
)
from service.stores.neo4j.search import lucene_query, lucene_terms
from service.stores.tiers import RunFilter, RunWrite

MAX_RUN_SCAN = 20_000  # runs of one user a dense search compares (newest first)
LESSON_WINDOW = 500  # the newest runs of a user that lessons look among
FT_GROUP = "runs"  # the tenant token of run and tool-call documents: ft_key(user, FT_GROUP)

RUN_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT run_uid IF NOT EXISTS FOR (r:Run) REQUIRE r.uid IS UNIQUE",
    "CREATE CONSTRAINT step_uid IF NOT EXISTS FOR (s:Step) REQUIRE s.uid IS UNIQUE",
    "CREATE CONSTRAINT tool_call_uid IF NOT EXISTS FOR (t:ToolCall) REQUIRE t.uid IS UNIQUE",
    "CREATE INDEX run_user IF NOT EXISTS FOR (r:Run) ON (r.user_id, r.created_at)",
    "CREATE INDEX step_run IF NOT EXISTS FOR (s:Step) ON (s.run_uid)",
    "CREATE INDEX tool_call_run IF NOT EXISTS FOR (t:ToolCall) ON (t.run_uid)",
    "CREATE FULLTEXT INDEX run_text IF NOT EXISTS FOR (r:Run) ON EACH [r.task, r.summary, r.error_kind, r.ft_key]",
    "CREATE FULLTEXT INDEX tool_call_text IF NOT EXISTS FOR (t:ToolCall) "
    "ON EACH [t.tool, t.arguments, t.error, t.error_kind, t.ft_key]",
)

MERGE_RUN: LiteralString = """
MERGE (r:Run {uid: $uid})
ON CREATE SET r.id = $run_id, r.user_id = $user_id, r.created_at = $accepted_at, r.ft_key = $ft_key
WITH r
WHERE r.deleted_at IS NULL OR r.deleted_at < $accepted_at OR $restore
SET r.created_at = CASE WHEN r.deleted_at IS NOT NULL OR $accepted_at < r.created_at THEN $accepted_at
                        ELSE r.created_at END,
    r.ft_key = $ft_key
REMOVE r.deleted_at
RETURN r.uid AS uid
"""

START: LiteralString = """
MATCH (r:Run {uid: $uid})
WHERE r.started_at IS NULL OR r.started_at <= $accepted_at
SET r.task = $task, r.project_id = $project_id, r.session_id = $session_id, r.agent_id = $agent_id,
    r.started_at = $accepted_at, r.task_vec = $vec, r.vec_model = $model
"""

COMPLETE: LiteralString = """
MATCH (r:Run {uid: $uid})
WHERE r.completed_at IS NULL OR r.completed_at <= $accepted_at
SET r.outcome = CASE WHEN $success THEN 'success' ELSE 'failure' END, r.summary = $summary,
    r.error_kind = $error_kind, r.completed_at = $accepted_at, r.summary_vec = $vec, r.vec_model = $model
"""

STEPS: LiteralString = """
MATCH (r:Run {uid: $uid})
UNWIND $steps AS s
MERGE (st:Step {uid: s.uid})
ON CREATE SET st.run_uid = $uid, st.user_id = $user_id, st.seq = s.seq
MERGE (r)-[:HAS_STEP]->(st)
WITH st, s WHERE s.action IS NOT NULL
SET st.action = s.action, st.thought = s.thought, st.accepted_at = $accepted_at
"""

CALLS: LiteralString = """
UNWIND $calls AS c
MATCH (st:Step {uid: c.step_uid})
MERGE (t:ToolCall {uid: c.uid})
SET t += c.props, t.run_uid = $uid, t.user_id = $user_id, t.ft_key = $ft_key
MERGE (st)-[:CALLED]->(t)
"""

TOUCH: LiteralString = """
UNWIND $rows AS row
MATCH (t:ToolCall {uid: row.memory_id})
MATCH (e:Entity {id: row.entity_id})
MERGE (t)-[:TOUCHED]->(e)
"""

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

# Erasing keeps a tombstone of the run (ids and times): steps and tool calls go, TOUCHED edges with them.
DELETE_RUN: LiteralString = """
MATCH (r:Run {uid: $uid}) WHERE r.user_id = $user_id AND r.deleted_at IS NULL AND r.created_at <= $before
CALL (r) {
    MATCH (t:ToolCall {run_uid: r.uid}) DETACH DELETE t
}
CALL (r) {
    MATCH (s:Step {run_uid: r.uid}) DETACH DELETE s
}
SET r = {uid: r.uid, id: r.id, user_id: r.user_id, created_at: r.created_at, deleted_at: $before}
RETURN count(r) AS n
"""

EXPIRED_RUNS: LiteralString = """
MATCH (r:Run) WHERE r.deleted_at IS NULL AND r.created_at < $before AND ($user_id IS NULL OR r.user_id = $user_id)
RETURN r.uid AS uid, r.user_id AS user_id LIMIT 1000
"""

RUNS_BEFORE: LiteralString = """
MATCH (r:Run) WHERE r.user_id = $user_id AND r.deleted_at IS NULL AND r.created_at <= $before
RETURN r.uid AS uid LIMIT 1000
"""


def run_uid(user_id: str, run_id: str) -> str:
    return uuid.uuid5(ID_NAMESPACE, f"run|{user_id}|{run_id}").hex


def step_uid(run_key: str, seq: int) -> str:
    return f"{run_key}:{seq}"


def _entity_rows(user_id: str, group: str, touched: list[Any], at: str,
                 names: NameRules, rows: dict[str, dict[str, Any]]) -> list[str]:
    """Entity rows (as rows.link_rows builds a memory's) for a tool call's touched names; their ids."""
    ids = []
    for raw_name, raw_type in ((str(t[0]), str(t[1])) for t in touched):
        name = entity_name(raw_name)
        if not name:
            continue
        eid = entity_id(user_id, group, name)
        row = rows.get(eid)
        if row is None:
            rows[eid] = {"id": eid, "user_id": user_id, "group_id": group, "name": name, "name_lc": name.casefold(),
                         "type": raw_type[:MAX_PREDICATE_CHARS] or "thing", "names": [name],
                         "keys": names.keys_of([name]), "created_at": at, "ft_key": ft_key(user_id, group)}
        elif name not in row["names"]:
            row["names"].append(name)
            row["keys"] = names.keys_of(row["names"])
        ids.append(eid)
    return ids


class RunGraph:
    """Run methods of Neo4jGraphStore."""

    _names: NameRules  # provided by Neo4jGraphStore

    async def _read(self, fn: Any, **params: Any) -> Any: ...  # provided by Neo4jGraphStore
    async def _write(self, fn: Any, **params: Any) -> Any: ...
    async def _link_write(self, links_of: Any, body: Any) -> Any: ...

    async def write_run(self, run: RunWrite) -> GraphReport | None:
        check_id(run.user_id, "user_id")
        check_id(run.run_id, "run id", 64)
        uid = run_uid(run.user_id, run.run_id)
        key = ft_key(run.user_id, FT_GROUP)
        project_id = (run.start or {}).get("project_id")
        group = group_id("project" if project_id else "global", project_id)
        steps, calls = [], []
        for step in run.steps:
            suid = step_uid(uid, int(step["seq"]))
            steps.append({"uid": suid, "seq": int(step["seq"]), "action": step.get("action"),
                          "thought": step.get("thought")})
            for call in step.get("tool_calls", []):
                calls.append({"step_uid": suid, "uid": f"{uid}:{call['id']}", "touched": call.get("touched", []),
                              "props": {k: v for k, v in call.items() if k != "touched"}})

        def links_of() -> dict[str, list[dict[str, Any]]]:
            entities: dict[str, dict[str, Any]] = {}
            touches = []
            for call in calls:
                for eid in _entity_rows(run.user_id, group, call["touched"], run.accepted_at,
                                        self._names, entities):
                    touches.append({"memory_id": call["uid"], "entity_id": eid})
            return {"entities": sorted(entities.values(), key=lambda r: str(r["id"])),
                    "mentions": sorted({(t["entity_id"], t["memory_id"]): t for t in touches}.values(),
                                       key=lambda t: (t["entity_id"], t["memory_id"])),
                    "relations": []}

        async def body(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]
                       ) -> GraphReport | None:
            live = await (await tx.run(MERGE_RUN, uid=uid, run_id=run.run_id, user_id=run.user_id,
                                       accepted_at=run.accepted_at, ft_key=key, restore=run.restore)).single()
            if live is None:
                return None  # deleted after this part was accepted
            if run.start is not None:
                await (await tx.run(START, uid=uid, accepted_at=run.accepted_at, task=run.start["task"],
                                    project_id=run.start.get("project_id"), session_id=run.start.get("session_id"),
                                    agent_id=run.start.get("agent_id"), vec=run.task_vec,
                                    model=run.vec_model)).consume()
            if steps:
                await (await tx.run(STEPS, uid=uid, user_id=run.user_id, steps=steps,
                                    accepted_at=run.accepted_at)).consume()
            if calls:
                await (await tx.run(CALLS, uid=uid, user_id=run.user_id, ft_key=key,
                                    calls=[{k: c[k] for k in ("step_uid", "uid", "props")} for c in calls])).consume()
            report = GraphReport()
            if graph["entities"]:
                report = await _touch(tx, graph, run.accepted_at, self._names, vectors)
            if run.outcome is not None:
                await (await tx.run(COMPLETE, uid=uid, accepted_at=run.accepted_at, success=run.outcome["success"],
                                    summary=run.outcome.get("summary", ""), error_kind=run.outcome.get("error_kind"),
                                    vec=run.summary_vec, model=run.vec_model)).consume()
            return report

        written: GraphReport | None = await self._link_write(links_of, body)
        return written

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

        found: dict[str, Any] | None = await self._read(run)
        return found

    async def list_runs(self, user_id: str, session_id: str | None, project_id: str | None, limit: int,
                        cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        check_id(user_id, "user_id")
        n = clamp(limit, MAX_PAGE_LIMIT)

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(LIST_RUNS, user_id=user_id, session_id=session_id, project_id=project_id,
                                  cursor=cursor or "", limit=n + 1)
            return [dict(r["run"]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._read(run)
        more = len(rows) > n
        rows = rows[:n]
        return rows, (f"{rows[-1]['created_at']}|{rows[-1]['id']}" if more and rows else None)

    async def run_summaries(self, user_id: str, run_ids: list[str]) -> list[dict[str, Any]]:
        uids = [run_uid(user_id, r) for r in run_ids[:MAX_PAGE_LIMIT]]

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            return [dict(r["run"]) for r in await (await tx.run(SUMMARIES, uids=uids, user_id=user_id)).data()]

        rows: list[dict[str, Any]] = await self._read(run)
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

        hits: list[tuple[str, float]] = await self._read(run)
        return hits

    async def lexical_runs(self, flt: RunFilter, query: str, k: int
                           ) -> tuple[list[tuple[str, float]], list[tuple[str, float, dict[str, Any]]]]:
        terms = lucene_terms(query)
        if not terms:
            return [], []
        params = self._filter_params(flt)
        key = ft_key(flt.user_id, FT_GROUP)
        run_query = lucene_query([key], ("task", "summary", "error_kind"), terms)
        call_query = lucene_query([key], ("tool", "arguments", "error", "error_kind"), terms)

        async def run(tx: AsyncManagedTransaction) -> tuple[list[tuple[str, float]],
                                                             list[tuple[str, float, dict[str, Any]]]]:
            runs = [(str(r["id"]), float(r["score"])) for r in
                    await (await tx.run(LEXICAL_RUNS, lucene=run_query, k=clamp(k, 500), **params)).data()]
            calls = [(str(r["id"]), float(r["score"]), dict(r["call"])) for r in
                     await (await tx.run(LEXICAL_CALLS, lucene=call_query, k=clamp(k, 500), **params)).data()]
            return runs, calls

        found: tuple[list[tuple[str, float]], list[tuple[str, float, dict[str, Any]]]] = await self._read(run)
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

        found: list[tuple[str, list[str], list[dict[str, Any]]]] = await self._read(run)
        return found

    async def lessons(self, user_id: str, project_id: str | None, session_id: str | None, scan: int,
                      after: int) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(LESSONS, user_id=user_id, project_id=project_id, session_id=session_id,
                                  window=LESSON_WINDOW, scan=clamp(scan, 200), after=clamp(after, 10))
            return [{"run": dict(r["run"]), "failed": dict(r["failed"]), "after": [dict(a) for a in r["after"]]}
                    for r in await result.data()]

        rows: list[dict[str, Any]] = await self._read(run)
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

        stats: dict[str, Any] = await self._read(run)
        return stats

    async def delete_run(self, user_id: str, run_id: str, before: str) -> bool:
        check_id(user_id, "user_id")
        return await self._delete_runs(user_id, [run_uid(user_id, run_id)], before) > 0

    async def _delete_runs(self, user_id: str, uids: list[str], before: str) -> int:
        async def run(tx: AsyncManagedTransaction) -> int:
            n = 0
            for uid in uids:
                rec = await (await tx.run(DELETE_RUN, uid=uid, user_id=user_id, before=before)).single()
                n += int(rec["n"]) if rec else 0
            return n

        deleted: int = await self._write(run)
        return deleted

    async def expire_runs(self, before: str, user_id: str | None = None) -> int:
        async def batch(tx: AsyncManagedTransaction) -> list[tuple[str, str]]:
            result = await tx.run(EXPIRED_RUNS, before=before, user_id=user_id)
            return [(str(r["uid"]), str(r["user_id"])) for r in await result.data()]

        total = 0
        for _ in range(10_000):
            rows: list[tuple[str, str]] = await self._read(batch)
            if not rows:
                break
            for owner in sorted({u for _, u in rows}):
                uids = [uid for uid, u in rows if u == owner]
                for i in range(0, len(uids), 50):
                    total += await self._delete_runs(owner, uids[i:i + 50], before)
        return total

    async def erase_runs(self, user_id: str, before: str) -> int:
        """Every run of the user accepted before `before` (batches of 1000, bounded)."""
        async def batch(tx: AsyncManagedTransaction) -> list[str]:
            return [str(r["uid"]) for r in await (await tx.run(RUNS_BEFORE, user_id=user_id, before=before)).data()]

        total = 0
        for _ in range(10_000):
            uids: list[str] = await self._read(batch)
            if not uids:
                break
            for i in range(0, len(uids), 50):
                total += await self._delete_runs(user_id, uids[i:i + 50], before)
        return total


async def _touch(tx: AsyncManagedTransaction, graph: dict[str, Any], now: str, names: NameRules,
                 vectors: dict[str, list[float]]) -> GraphReport:
    """The touched entities through the identity gate (as a memory's mentions), then the TOUCHED edges. What the
    gate did, per tool call (facts.finish_links)."""
    origin = {r["id"]: (r["name"], r["type"]) for r in graph["entities"]}
    named = [(m["memory_id"], m["entity_id"]) for m in graph["mentions"]]
    if names.resolves:
        await resolve(tx, names, graph, now, vectors)  # rewrites the rows ("mentions" = touches) in place
    else:
        graph["decided"] = await facts.decided_without_gate(tx, list(origin))
    await (await tx.run(cypher_writes.UPSERT_ENTITIES, rows=graph["entities"], max_aliases=MAX_ALIASES)).consume()
    if graph.get("same_as"):
        await (await tx.run(resolution.SAME_AS, rows=graph["same_as"])).consume()
    if graph["mentions"]:
        await (await tx.run(TOUCH, rows=graph["mentions"])).consume()
    return await facts.finish_links(tx, graph, origin, named)
