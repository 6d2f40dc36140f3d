"""Dedup maintenance on the real stores (Redis, Neo4j, Qdrant Edge) through the API and the worker.

Near duplicates are planted with exact cosines by writing vectors through the store layer (the
hash embedder's neighbourhoods are too coarse to aim at 0.94 vs 0.96)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest

from scripts.bench import graph_probe as probe
from scripts.bench.procs import free_port
from service.core.domain import Memory, Scope, content_hash
from service.deps import Deps
from service.identity.rules import NameRules
from service.maintenance.records import DedupKeys, DedupLock
from service.maintenance.sweep import DedupSweep
from service.stores.graph import EntityRef, MemoryLinks, RelationRef
from service.stores.neo4j.rows import relation_id
from service.stores.neo4j.store import Neo4jGraphStore
from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task, write_raw
from worker.crons import dedup_cron
from worker.handlers import job_handlers, worker_context

App = tuple[httpx.AsyncClient, Deps]


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[App]:
    # Own app (own vector store and queue prefix); the cron is off so only the tests start runs.
    # planted vectors around a threshold of 0.95, set explicitly (the hash embedder has no calibrated one)
    async with running_app(tmp_path_factory.mktemp("dedup"), dedup_cron_enabled=False,
                           dedup_similarity_threshold=0.95) as pair:
        yield pair


# -------------------------------------------------------------------------------------------
# planting
# -------------------------------------------------------------------------------------------

T0 = datetime.now(UTC) - timedelta(days=1)


class Plant:
    """Unit vectors with chosen cosines: each `family` is a random plane; angle a gives
    cos(a)·u + sin(a)·w, so two members of a family have cosine cos(a1 - a2), and members of
    different families are nearly orthogonal (random directions in 384 dimensions)."""

    def __init__(self, dim: int, seed: int) -> None:
        self.dim = dim
        self.rng = np.random.default_rng(seed)
        self.minute = 0

    def family(self) -> tuple[np.ndarray, np.ndarray]:
        u = self.rng.standard_normal(self.dim)
        u /= np.linalg.norm(u)
        w = self.rng.standard_normal(self.dim)
        w -= (w @ u) * u
        w /= np.linalg.norm(w)
        return u, w

    @staticmethod
    def vec(fam: tuple[np.ndarray, np.ndarray], cos: float) -> list[float]:
        u, w = fam
        a = float(np.arccos(cos))
        return [float(x) for x in np.cos(a) * u + np.sin(a) * w]

    def memory(
        self, user: str, content: str, *, project: str | None = None, minutes: int | None = None,
        when: datetime | None = None,
    ) -> Memory:
        self.minute += 1
        created = (when or T0 + timedelta(minutes=self.minute if minutes is None else minutes)).isoformat()
        return Memory(
            id=str(uuid.uuid4()), user_id=user, content=content,
            category="convention" if project else "preference",
            scope=Scope.PROJECT if project else Scope.GLOBAL, project_id=project,
            hash=content_hash(content), created_at=created, updated_at=created,
        )


async def put(deps: Deps, rows: list[tuple[Memory, list[float]]], links: list[MemoryLinks] | None = None) -> None:
    memories = [m for m, _ in rows]
    await deps.vectors.upsert(memories, [v for _, v in rows])
    await deps.graph.memories.upsert_memories(memories, links)  # beside the ledger, on purpose


async def start_run(client: httpx.AsyncClient, **body: Any) -> str:
    resp = await client.post("/v1/maintenance/dedup", json=body)
    assert resp.status_code == 202, resp.text
    accepted = resp.json()
    assert accepted["status"] == "accepted" and accepted["run_id"] == accepted["task_id"]
    assert accepted["poll_url"] == f"/v1/tasks/{accepted['task_id']}"  # every task kind is polled there
    assert accepted["run_url"] == f"/v1/maintenance/runs/{accepted['run_id']}"
    return str(accepted["run_id"])


async def run_dedup(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    run_id = await start_run(client, **body)
    done = await wait_task(client, run_id, timeout=60)
    assert done["status"] == "completed", done
    assert done["result"]["run_id"] == run_id
    resp = await client.get(f"/v1/maintenance/runs/{run_id}")
    assert resp.status_code == 200, resp.text
    report: dict[str, Any] = resp.json()
    return report


def user_report(report: dict[str, Any], user: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [u for u in report["users"] if u["user_id"] == user]
    assert len(found) == 1, report["users"]
    return found[0]


def removed(report: dict[str, Any], user: str, phase: str | None = None) -> set[str]:
    u = user_report(report, user)
    phases = [phase] if phase else ["exact", "near"]
    return {i for p in phases for i in u[p]["removed_ids"]}


async def live_ids(deps: Deps, memories: list[Memory]) -> set[str]:
    return {m.id for m in await deps.vectors.get([m.id for m in memories])}


async def episodes(deps: Deps, user: str) -> dict[str, dict[str, Any]]:
    page = await deps.graph.reads.list_episodes(user, None, 500, None)
    return {str(e["id"]): e for e in page.items}


async def edges(deps: Deps, user: str) -> dict[str, dict[str, Any]]:
    return {str(r["id"]): dict(r) for r in await probe.relations(deps.graph, user)}


# -------------------------------------------------------------------------------------------
# phases
# -------------------------------------------------------------------------------------------


async def test_exact_group_keeps_newest_through_the_api(app: App) -> None:
    client, deps = app
    user = unique("exact")
    # one content under three global categories: three memories with one hash, written in order
    ids = []
    for category in ("preference", "personal_fact", "technical_skill"):
        done = await write_raw(client, content="Prefers tabs over spaces", user_id=user, category=category)
        ids.append(done["result"]["memories"][0]["id"])
    other = await write_raw(client, content="Drinks green tea", user_id=user, category="preference")
    other_id = other["result"]["memories"][0]["id"]

    report = await run_dedup(client, user_id=user)
    assert report["status"] == "completed" and report["trigger"] == "api" and not report["dry_run"]
    assert report["started_at"] and report["finished_at"] and report["started_at"] <= report["finished_at"]
    u = user_report(report, user)
    assert u["exact"]["scanned"] == 4 and u["exact"]["groups"] == 1 and u["exact"]["removed"] == 2
    assert u["exact"]["group_details"] == [{"keep": ids[2], "remove": sorted(ids[:2])}]
    assert set(u["exact"]["removed_ids"]) == set(ids[:2])
    assert u["near"]["removed"] == 0
    listed = await client.get("/v1/memories", params={"user_id": user})
    assert {m["id"] for m in listed.json()["memories"]} == {ids[2], other_id}
    nodes = await episodes(deps, user)
    for old in ids[:2]:
        assert nodes[old]["deleted_at"] and nodes[old]["duplicate_of"] == ids[2]
    assert nodes[ids[2]]["deleted_at"] is None


async def test_near_groups_transitive_chain_and_decoys(app: App) -> None:
    client, deps = app
    user = unique("near")
    p = Plant(deps.embedder.dim, seed=1)
    step = float(np.arccos(0.96))
    chain_fam, pair_fam, decoy_fam = p.family(), p.family(), p.family()
    a = (p.memory(user, "chain a"), p.vec(chain_fam, 1.0))
    b = (p.memory(user, "chain b"), p.vec(chain_fam, float(np.cos(step))))  # a~b 0.96
    c = (p.memory(user, "chain c"), p.vec(chain_fam, float(np.cos(2 * step))))  # b~c 0.96, a~c 0.84
    newer_pair = (p.memory(user, "pair new", minutes=900), p.vec(pair_fam, 1.0))
    older_pair = (p.memory(user, "pair old", minutes=800), p.vec(pair_fam, 0.97))
    d1 = (p.memory(user, "decoy 1"), p.vec(decoy_fam, 1.0))
    d2 = (p.memory(user, "decoy 2"), p.vec(decoy_fam, 0.949))  # just below 0.95: both stay
    rows = [a, b, c, newer_pair, older_pair, d1, d2]
    await put(deps, rows)

    report = await run_dedup(client, user_id=user)
    u = user_report(report, user)
    assert u["near"]["groups"] == 2 and u["near"]["removed"] == 3
    details = {g["keep"]: sorted(g["remove"]) for g in u["near"]["group_details"]}
    assert details == {c[0].id: sorted([a[0].id, b[0].id]), newer_pair[0].id: [older_pair[0].id]}
    assert await live_ids(deps, [m for m, _ in rows]) == {c[0].id, newer_pair[0].id, d1[0].id, d2[0].id}
    assert u["exact"]["removed"] == 0


async def test_never_across_users_or_projects(app: App) -> None:
    client, deps = app
    alice, bob = unique("alice"), unique("bob")
    p = Plant(deps.embedder.dim, seed=2)
    fam = p.family()
    v = p.vec(fam, 1.0)
    near = p.vec(fam, 0.99)
    same = "Use snake_case for database columns"
    rows = [
        (p.memory(alice, same), v),
        (p.memory(alice, same, project="p1"), v),
        (p.memory(alice, same, project="p2"), v),
        (p.memory(alice, "near in the third project", project="p3"), near),
        (p.memory(alice, same, project="p3"), v),  # near-duplicate of the one above, same project
        (p.memory(bob, same), v),
        (p.memory(bob, "near bob"), near),  # near-duplicate of bob's global one
    ]
    await put(deps, rows)
    for user in (alice, bob):
        await run_dedup(client, user_id=user)
    gone = {m.id for m, _ in rows} - await live_ids(deps, [m for m, _ in rows])
    # only within (alice, p3) and (bob, global): the older of each pair
    assert gone == {rows[3][0].id, rows[5][0].id}


async def test_graph_edges_expired_or_kept_with_survivor(app: App) -> None:
    client, deps = app
    user = unique("graph")
    p = Plant(deps.embedder.dim, seed=3)
    fam = p.family()
    old = p.memory(user, "Uses Postgres 15 for the main db")
    new = p.memory(user, "Uses PostgreSQL 15 for the main database")
    other = p.memory(user, "The main database is backed up nightly")

    def rel(subject: str, predicate: str, obj: str) -> RelationRef:
        return RelationRef(subject, predicate, obj, f"{subject} {predicate} {obj}")

    links = [
        MemoryLinks(old.id, [EntityRef("user"), EntityRef("postgres")], [
            rel("user", "uses", "postgres"), rel("user", "uses", "database"), rel("db", "backed_up", "nightly"),
        ]),
        MemoryLinks(new.id, [EntityRef("user"), EntityRef("database")], [rel("user", "uses", "database")]),
        MemoryLinks(other.id, [EntityRef("db")], [rel("db", "backed_up", "nightly")]),
    ]
    await put(deps, [(old, p.vec(fam, 1.0)), (new, p.vec(fam, 0.97)), (other, p.vec(p.family(), 1.0))], links)
    only_old = relation_id(user, "global", "user", "uses", "postgres")
    shared = relation_id(user, "global", "user", "uses", "database")
    with_other = relation_id(user, "global", "db", "backed_up", "nightly")

    report = await run_dedup(client, user_id=user)
    u = user_report(report, user)
    assert u["near"]["removed_ids"] == [old.id]
    assert u["near"]["graph_edges_expired"] == 1 and u["near"]["graph_expired_edge_ids"] == [only_old]
    assert not u["near"]["errors"]
    e = await edges(deps, user)
    assert e[only_old]["expired_at"] is not None  # only the removed memory supported it
    assert e[shared]["expired_at"] is None and e[shared]["memory_ids"] == [new.id]  # the survivor too
    assert e[with_other]["expired_at"] is None and e[with_other]["memory_ids"] == [other.id]
    nodes = await episodes(deps, user)
    assert nodes[old.id]["deleted_at"] and nodes[old.id]["duplicate_of"] == new.id
    assert nodes[new.id]["deleted_at"] is None


async def test_dry_run_reports_what_the_real_run_removes_then_nothing_is_left(app: App) -> None:
    client, deps = app
    user = unique("dry")
    p = Plant(deps.embedder.dim, seed=4)
    rows: list[tuple[Memory, list[float]]] = []
    for g in range(5):
        fam = p.family()
        rows += [
            (p.memory(user, f"topic {g}"), p.vec(fam, 1.0)),
            (p.memory(user, f"topic {g} again"), p.vec(fam, 0.98)),  # near duplicate
            (p.memory(user, f"topic {g}"), p.vec(fam, 1.0)),  # exact copy of the first
        ]
    rows.append((p.memory(user, "other", project="px"), p.vec(p.family(), 1.0)))
    await put(deps, rows)
    everything = [m for m, _ in rows]

    dry = await run_dedup(client, user_id=user, dry_run=True)
    assert dry["dry_run"] and dry["status"] == "completed"
    would = removed(dry, user)
    assert len(would) == 10  # per topic: 3 memories, 1 stays
    assert await live_ids(deps, everything) == {m.id for m in everything}  # nothing removed
    assert all(e["deleted_at"] is None for e in (await episodes(deps, user)).values())

    real = await run_dedup(client, user_id=user)
    assert removed(real, user) == would
    for phase in ("exact", "near"):
        assert removed(real, user, phase) == removed(dry, user, phase)
    assert await live_ids(deps, everything) == {m.id for m in everything} - would

    again = await run_dedup(client, user_id=user)
    u = user_report(again, user)
    assert u["exact"]["groups"] == u["near"]["groups"] == 0 and not removed(again, user)
    assert u["boundaries"] == 2 and u["exact"]["scanned"] == 6


async def test_memories_written_after_the_run_started_are_left_alone(app: App) -> None:
    client, deps = app
    user = unique("late")
    p = Plant(deps.embedder.dim, seed=5)
    fam = p.family()
    future = datetime.now(UTC) + timedelta(hours=1)
    old = p.memory(user, "same content")
    late = p.memory(user, "same content", when=future)  # written "after the start": created later
    late_near = p.memory(user, "near content", when=future + timedelta(seconds=1))
    await put(deps, [(old, p.vec(fam, 1.0)), (late, p.vec(fam, 1.0)), (late_near, p.vec(fam, 0.99))])
    report = await run_dedup(client, user_id=user)
    u = user_report(report, user)
    assert u["skipped_recent"] == 2 and not removed(report, user)
    assert await live_ids(deps, [old, late, late_near]) == {old.id, late.id, late_near.id}


# -------------------------------------------------------------------------------------------
# failures and concurrency
# -------------------------------------------------------------------------------------------


async def test_graph_outage_completes_vector_phase_and_next_run_retries(app: App) -> None:
    client, deps = app
    user = unique("outage")
    p = Plant(deps.embedder.dim, seed=6)
    fam = p.family()
    old, new = p.memory(user, "outage old"), p.memory(user, "outage new")
    links = [
        MemoryLinks(old.id, [], [RelationRef("user", "likes", "vim", "user likes vim")]),
        MemoryLinks(new.id, [], [RelationRef("user", "likes", "neovim", "user likes neovim")]),
    ]
    await put(deps, [(old, p.vec(fam, 1.0)), (new, p.vec(fam, 0.98))], links)
    dead = Neo4jGraphStore(f"bolt://127.0.0.1:{free_port()}", "neo4j", None, "memory", 1.0, NameRules())
    try:
        sweep = DedupSweep(deps.settings.redis, deps.settings.dedup, deps.settings.calibration.dedup,
                           deps.vectors, dead.memories, deps.redis)
        report = await sweep.run(uuid.uuid4().hex, trigger="manual", user_id=user)
    finally:
        await dead.close()
    assert report.status == "completed"
    u = next(x for x in report.users if x.user_id == user)
    assert u.near.removed_ids == [old.id] and u.near.graph_edges_expired == 0
    assert u.near.errors and "pending" in u.near.errors[0] and report.totals.errors >= 1
    assert await live_ids(deps, [old, new]) == {new.id}  # the vector phase finished
    assert report.graph_retry.pending_after >= 1
    assert (await episodes(deps, user))[old.id]["deleted_at"] is None  # graph untouched so far

    # the stored report says the same
    stored = (await client.get(f"/v1/maintenance/runs/{report.run_id}")).json()
    assert user_report(stored, user)["near"]["errors"] == u.near.errors

    nxt = await run_dedup(client, user_id=user)
    assert nxt["graph_retry"]["retried"] >= 1 and nxt["graph_retry"]["pending_after"] == 0
    assert nxt["graph_retry"]["graph_edges_expired"] >= 1
    nodes = await episodes(deps, user)
    assert nodes[old.id]["deleted_at"] and nodes[old.id]["duplicate_of"] == new.id
    e = await edges(deps, user)
    assert e[relation_id(user, "global", "user", "likes", "vim")]["expired_at"] is not None
    assert e[relation_id(user, "global", "user", "likes", "neovim")]["memory_ids"] == [new.id]


async def test_overlapping_runs_do_not_both_run(app: App) -> None:
    client, deps = app
    user = unique("overlap")
    p = Plant(deps.embedder.dim, seed=7)
    fam = p.family()
    rows = [(p.memory(user, "overlap a"), p.vec(fam, 1.0)), (p.memory(user, "overlap b"), p.vec(fam, 0.99))]
    await put(deps, rows)

    # another run holds the lock: an API run and the cron both skip, and remove nothing
    holder = DedupLock(deps.redis, DedupKeys(deps.settings.redis.queue_name).lock, "someone-else")
    assert await holder.acquire()
    try:
        skipped = await run_dedup(client, user_id=user)
        assert skipped["status"] == "skipped" and "someone-else" in skipped["detail"]
        assert skipped["users"] == [] and skipped["totals"]["near_removed"] == 0
        cron = await dedup_cron({**worker_context(deps), "job_id": f"cron:dedup_cron:{uuid.uuid4().hex}"})
        assert cron is not None and cron["status"] == "skipped"
        assert await live_ids(deps, [m for m, _ in rows]) == {m.id for m, _ in rows}
    finally:
        await holder.release()

    # two runs started together: exactly one works
    sweep = job_handlers(deps).sweep
    first, second = await asyncio.gather(
        sweep.run(uuid.uuid4().hex, trigger="manual", user_id=user),
        sweep.run(uuid.uuid4().hex, trigger="manual", user_id=user),
    )
    assert sorted([first.status, second.status]) == ["completed", "skipped"]
    winner = first if first.status == "completed" else second
    assert winner.totals.near_removed == 1
    assert await DedupLock(deps.redis, DedupKeys(deps.settings.redis.queue_name).lock, "x").holder() is None


async def test_runs_are_listed_and_validated(app: App) -> None:
    client, _ = app
    user = unique("list")
    report = await run_dedup(client, user_id=user, dry_run=True)
    listed = await client.get("/v1/maintenance/runs", params={"limit": 500})
    assert listed.status_code == 200
    runs = listed.json()["items"]
    assert runs[0]["run_id"] == report["run_id"]  # newest first
    assert "users" not in runs[0] and runs[0]["status"] == "completed" and runs[0]["dry_run"]
    starts = [r["queued_at"] or r["started_at"] for r in runs]
    assert starts == sorted(starts, reverse=True)
    assert (await client.get("/v1/maintenance/runs/not-a-run")).status_code == 404
    assert (await client.post("/v1/maintenance/dedup", json={"user_id": "bad id!"})).status_code == 422
    assert (await client.post("/v1/maintenance/dedup", json={"dry_run": True, "extra": 1})).status_code == 422
    # a run of a user without memories completes with nothing to do
    empty = await run_dedup(client, user_id=unique("nobody"))
    assert empty["status"] == "completed" and empty["users"] == []
    # no body: every user, real run (this module's app holds only the data of the tests above)
    resp = await client.post("/v1/maintenance/dedup")
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"], timeout=60)
    assert done["status"] == "completed" and done["result"]["status"] == "completed"
    everyone = (await client.get(done["result"]["run_url"])).json()
    assert everyone["user_id"] is None and not everyone["dry_run"]
    assert all(u["boundaries"] >= 1 for u in everyone["users"])
    assert [u["user_id"] for u in everyone["users"]] == sorted(u["user_id"] for u in everyone["users"])
