"""Task traces in Neo4j: `(:Run)-[:HAS_STEP]->(:Step)-[:CALLED]->(:ToolCall)-[:TOUCHED]->(:Entity)`.

Keys are derived from the tenant: a run's `uid` is uuid5(user, run id), a step's uid(run uid, seq), so parts
of one run written in any order MERGE into the same nodes, and one user can never address another's run.
A deleted run keeps a tombstone (`uid, user_id, id, deleted_at`) so that a part accepted before the delete and
run after it writes nothing. The writes, deletes and retention (`RunGraph`); the reads are run_reads.py
(`RunReads`).
"""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.stores.graph import EntityNameRules, group_id
from service.stores.neo4j import links
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import (
    MAX_PREDICATE_CHARS,
    RUN_FT_GROUP,
    check_id,
    entity_id,
    entity_name,
    ft_key,
    run_uid,
)
from service.stores.reports import GraphReport
from service.stores.tiers import RunWrite

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


def step_uid(run_key: str, seq: int) -> str:
    return f"{run_key}:{seq}"


def _entity_rows(user_id: str, group: str, touched: list[Any], at: str,
                 names: EntityNameRules, rows: dict[str, dict[str, Any]]) -> list[str]:
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
                         "keys": names.keys_of([name]), "roles": [], "created_at": at, "ft_key": ft_key(user_id, group)}
        elif name not in row["names"]:
            row["names"].append(name)
            row["keys"] = names.keys_of(row["names"])
        ids.append(eid)
    return ids


class RunGraph:
    """Run writes, deletes and retention (`RunWriteStore`). `names`: the identity gate of the touched entities."""

    def __init__(self, executor: Neo4jExecutor, names: EntityNameRules) -> None:
        self._exec = executor
        self._names = names

    async def write_run(self, run: RunWrite) -> GraphReport | None:
        check_id(run.user_id, "user_id")
        check_id(run.run_id, "run id", 64)
        uid = run_uid(run.user_id, run.run_id)
        key = ft_key(run.user_id, RUN_FT_GROUP)
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

        written: GraphReport | None = await self._exec.link_write(self._names, links_of, body)
        return written

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

        deleted: int = await self._exec.write(run)
        return deleted

    async def expire_runs(self, before: str, user_id: str | None = None) -> int:
        async def batch(tx: AsyncManagedTransaction) -> list[tuple[str, str]]:
            result = await tx.run(EXPIRED_RUNS, before=before, user_id=user_id)
            return [(str(r["uid"]), str(r["user_id"])) for r in await result.data()]

        total = 0
        for _ in range(10_000):
            rows: list[tuple[str, str]] = await self._exec.read(batch)
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
            uids: list[str] = await self._exec.read(batch)
            if not uids:
                break
            for i in range(0, len(uids), 50):
                total += await self._delete_runs(user_id, uids[i:i + 50], before)
        return total


async def _touch(tx: AsyncManagedTransaction, graph: dict[str, Any], now: str, names: EntityNameRules,
                 vectors: dict[str, list[float]]) -> GraphReport:
    """The touched entities through the identity gate (as a memory's mentions), then the TOUCHED edges. What the
    gate did, per tool call (links.py)."""
    origin, named = await links.write_entities(tx, graph, now, names, vectors)  # "mentions" = touches
    if graph["mentions"]:
        await (await tx.run(TOUCH, rows=graph["mentions"])).consume()
    return await links.finish_links(tx, graph, origin, named)
