"""The plans of one graph write's statements on a dense node: PROFILE of each statement of
`Neo4jGraphStore.upsert_memories` (rolled back), for a write naming entities that already have --degree
relations (the subject "user" and the object "hot tool") and 2 x --degree mentions ("user"); then, in the same
rolled-back transaction, a delete of every memory mentioning "user" but one and the erase of one (`MARK_REMOVED`,
`ERASE_REMOVED`), and a small entity merged into "user" and unmerged (`MERGE_ENTITIES`, `UNMERGE`). Prints each
operator with its rows and db hits, and the statement's total db hits. Runs on an older checkout too (the
before/after in docs/benchmarks.md).

    .venv/bin/python scripts/bench/graph_plans.py --neo4j-uri bolt://127.0.0.1:17687 --degree 5000

Db hits, not time: the count of store accesses the plan made, which grows with the node's degree when a
statement walks the node's relationships and stays flat when an index serves the lookup.

`--smoke` (no other argument needed): --degree 50 on TEST_NEO4J_URI / TEST_NEO4J_DATABASE when set; checks every
write was stored and each statement printed a plan, removes its user, then prints `smoke: OK` (else `smoke: FAIL`,
exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from scripts.bench.procs import smoke_verdict  # noqa: E402
from service.core.domain import Memory, Scope, content_hash  # noqa: E402
from service.identity.rules import NameRules  # noqa: E402
from service.stores.graph import EntityRef, MemoryLinks, RelationRef  # noqa: E402
from service.stores.neo4j import curation, cypher_writes  # noqa: E402
from service.stores.neo4j import memories as store_module  # noqa: E402
from service.stores.neo4j.rows import MAX_ALIASES, MAX_ROLES, entity_id, link_rows, memory_row  # noqa: E402
from service.stores.neo4j.store import Neo4jGraphStore  # noqa: E402

supersede_rows = getattr(store_module, "supersede_rows", None)  # absent in older commits (for a before/after run)


def memory(user_id: str, i: int, at: str) -> Memory:
    content = f"memory {i} of the plan bench"
    return Memory(id=str(uuid.uuid4()), user_id=user_id, content=content, category="personal_fact",
                  scope=Scope.GLOBAL, project_id=None, hash=content_hash(content), created_at=at, updated_at=at)


def tree(plan: dict[str, Any], depth: int = 0) -> list[str]:
    args = plan.get("args", {})
    details = " ".join(str(args.get("Details", "")).split())[:110]
    width = max(1, 44 - 2 * depth)
    line = (f"{'  ' * depth}{plan['operatorType'].split('@')[0]:<{width}} rows {plan.get('rows', 0):>6} "
            f"db hits {plan.get('dbHits', 0):>7}  {details}")
    return [line] + [x for child in plan.get("children", []) for x in tree(child, depth + 1)]


def hits(plan: dict[str, Any]) -> int:
    return int(plan.get("dbHits", 0)) + sum(hits(c) for c in plan.get("children", []))


def relation(i: int) -> RelationRef:
    """Even i: `project <i> uses hot tool` (the hot object); odd i: `user uses tool <i>`, every fourth odd one
    `user deploys_to tool <i>`, a single-valued fact, so "user" has a long deploys_to history."""
    if i % 2 == 0:
        return RelationRef(f"project {i}", "uses", "hot tool", f"fact {i}")
    return RelationRef("user", "deploys_to" if i % 8 == 1 else "uses", f"tool {i}", f"fact {i}")


async def load(store: Neo4jGraphStore, user_id: str, degree: int) -> list[Memory]:
    """2 x `degree` memories, each mentioning the hot entity "user"; "user" gets `degree` relations (subject), and
    "hot tool" `degree` relations (object)."""
    memories = [memory(user_id, i, f"2024-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00")
                for i in range(2 * degree)]
    links = [MemoryLinks(memory_id=m.id, entities=[EntityRef("user", "person")], relations=[relation(i)])
             for i, m in enumerate(memories)]
    for start in range(0, 2 * degree, 500):
        await store.memories.upsert_memories(memories[start : start + 500], links[start : start + 500])
    # a small entity to merge into "user": it uses the hot tool (a merge asks whether "user" has that edge already)
    op = memory(user_id, 10**8, "2024-06-01T00:00:00+00:00")
    operator = [EntityRef("the operator", "person")]
    await store.memories.upsert_memories([op], [MemoryLinks(memory_id=op.id, entities=operator,
                                                   relations=[RelationRef("the operator", "uses", "hot tool", "op")])])
    return memories


async def stored(store: Neo4jGraphStore, user_id: str) -> int:
    """The user's (:Memory) nodes (--smoke: every write stored)."""
    rows = await store.executor.read_one("MATCH (m:Memory {user_id: $u}) RETURN count(m)", u=user_id)
    return int(rows[0][0]) if rows else 0


async def drop_user(store: Neo4jGraphStore, user_id: str) -> None:
    """Remove the user's nodes (--smoke only: a plain run keeps them), in bounded batches."""
    async def run(tx: Any) -> int:
        rec = await (await tx.run("MATCH (n) WHERE n.user_id = $u WITH n LIMIT 5000 DETACH DELETE n "
                                  "RETURN count(*) AS n", u=user_id)).single()
        return int(rec["n"]) if rec else 0

    for _ in range(100):  # bounded: a smoke user has a few hundred nodes
        if await store.executor.write(run) == 0:
            return


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--neo4j-uri", default="bolt://127.0.0.1:7687")
    ap.add_argument("--neo4j-database", default="memory")
    ap.add_argument("--degree", type=int, default=5000)
    ap.add_argument("--smoke", action="store_true", help="a short check on the test stack: --degree 50")
    args = ap.parse_args()
    if args.smoke:
        args.neo4j_uri = os.environ.get("TEST_NEO4J_URI", args.neo4j_uri)
        args.neo4j_database = os.environ.get("TEST_NEO4J_DATABASE", args.neo4j_database)
        args.degree = 50
    planned: list[tuple[str, int]] = []  # (statement, db hits) of each plan printed
    in_graph = -1
    store = Neo4jGraphStore(args.neo4j_uri, "neo4j", None, args.neo4j_database, 60, NameRules())
    try:
        await store.ensure_schema()
        user_id = f"plan-{uuid.uuid4().hex[:10]}"
        started = time.perf_counter()
        loaded = await load(store, user_id, args.degree)
        print(f"loaded {args.degree} relations of subject 'user' and of object 'hot tool' and {2 * args.degree} "
              f"mentions of 'user' in {time.perf_counter() - started:.1f} s")
        m = memory(user_id, 10**9, "2025-06-01T00:00:00+00:00")
        link = MemoryLinks(memory_id=m.id, entities=[EntityRef("user", "person")], relations=[
            RelationRef("user", "deploys_to", "tool 9", "deploys to tool 9 again"),  # an existing edge, single-valued
            RelationRef("user", "uses", "hot tool", "uses the hot tool"),  # a new edge between two dense nodes
            RelationRef("user", "uses", "tool 3", "uses tool 3 still"),  # an existing edge
        ])
        graph = link_rows([m], [link], NameRules())
        single = supersede_rows(graph["relations"]) if supersede_rows else [  # older commits: no slot
            {"source_id": r["source_id"], "id": r["id"], "valid_at": str(r["valid_at"])} for r in graph["relations"]
            if r["predicate"] == "deploys_to"]
        steps: list[tuple[str, str, dict[str, Any]]] = [
            ("UPSERT_MEMORIES", cypher_writes.UPSERT_MEMORIES, {"rows": [memory_row(m)]}),
            ("UPSERT_ENTITIES", cypher_writes.UPSERT_ENTITIES, {"rows": graph["entities"], "max_aliases": MAX_ALIASES,
                                                                "max_roles": MAX_ROLES}),
            ("UPSERT_MENTIONS", cypher_writes.UPSERT_MENTIONS, {"rows": graph["mentions"]}),
            ("UPSERT_RELATIONS", cypher_writes.UPSERT_RELATIONS, {"rows": graph["relations"]}),
            ("SUPERSEDE", cypher_writes.SUPERSEDE, {"rows": single, "now": "2026-01-01T00:00:00+00:00"}),
            # a delete of every memory mentioning "user" but one in the middle (a walk of its mentions, from
            # either end, passes --degree removed ones), then the erase of one: does a live memory still mention it?
            ("MARK_REMOVED", cypher_writes.MARK_REMOVED, {
                "rows": [{"id": x.id, "duplicate_of": None, "user_id": user_id}
                         for x in loaded[: args.degree] + loaded[args.degree + 1:]]
                + [{"id": m.id, "duplicate_of": None, "user_id": user_id}],
                "now": "2026-01-02"}),
            ("ERASE_REMOVED", cypher_writes.ERASE_REMOVED, {"memory_ids": [loaded[0].id]}),
            # "the operator" merged into "user", then unmerged
            ("MERGE_ENTITIES", cypher_writes.MERGE_ENTITIES, {"source_id": entity_id(user_id, "global", "the operator"),
                                                         "target_id": entity_id(user_id, "global", "user"),
                                                         "user_id": user_id, "now": "2026-01-03"}),
            ("UNMERGE", curation.UNMERGE, {"id": entity_id(user_id, "global", "the operator"), "user_id": user_id,
                                           "now": "2026-01-04"}),
        ]
        async with store.executor.driver.session(database=args.neo4j_database) as session:
            tx = await session.begin_transaction()
            try:
                for name, stmt, params in steps:
                    summary = await (await tx.run("PROFILE " + stmt, **params)).consume()
                    plan = summary.profile or {}
                    print(f"\n{name}: {hits(plan)} db hits")
                    print("\n".join(tree(plan)))
                    if plan.get("operatorType"):
                        planned.append((name, hits(plan)))
            finally:
                await tx.rollback()
        await store.memories.remove_memories([], "2026-01-01T00:00:00+00:00")
        if args.smoke:
            in_graph = await stored(store, user_id)
            await drop_user(store, user_id)
    finally:
        await store.close()
    if args.smoke:
        print(f"\nsmoke: {in_graph} of {2 * args.degree + 1} memories stored, {len(planned)} of {len(steps)} plans "
              f"printed, {sum(h for _, h in planned)} db hits in all")
        ok = in_graph == 2 * args.degree + 1 and len(planned) == len(steps) and all(h > 0 for _, h in planned)
        return smoke_verdict(ok)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
