"""Raw writes end to end: API -> Redis/ARQ -> worker -> Qdrant + Neo4j -> status -> search."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from scripts.bench import graph_probe as probe
from service.deps import Deps
from service.stores.vector import MemoryFilter
from tests.conftest import unique
from tests.integration.conftest import wait_task, write_raw


async def test_raw_write_is_accepted_processed_and_searchable(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("u")
    resp = await client.post(
        "/v1/memories/raw",
        json={"content": "Prefers dark mode in every editor", "user_id": user, "category": "preference",
              "agent_id": "claude-code", "metadata": {"source": "test"}},
    )
    assert resp.status_code == 202
    body = resp.json()
    assert body["status"] == "accepted"
    assert body["poll_url"] == f"/v1/memories/status/{body['task_id']}"

    done = await wait_task(client, body["task_id"])
    assert done["status"] == "completed", done
    assert done["error"] is None
    assert done["_seen"][-1] == "completed"
    [mem] = done["result"]["memories"]
    assert mem["content"] == "Prefers dark mode in every editor"
    assert mem["category"] == "preference"
    assert mem["scope"] == "global"
    assert mem["project_id"] is None
    assert mem["created_at"]

    # the final record dropped the job's lease and its pending entry (one script)
    assert not await deps.redis.exists(deps.tasks.keys.lease(body["task_id"]))
    assert not await deps.tasks.leases.is_pending(body["task_id"])
    # both stores hold it
    assert await deps.vectors.count(MemoryFilter(user_id=user)) == 1
    assert await probe.count_memories(deps.graph, user) == 1

    resp = await client.post("/v1/search", json={"query": "dark mode editor", "user_id": user})
    assert resp.status_code == 200
    out = resp.json()
    assert out["status"] == "ok"
    [hit] = out["results"]
    assert hit["id"] == mem["id"]
    assert hit["source"] == "vector"
    assert hit["scope"] == "global"
    assert hit["category"] == "preference"
    assert 0 < hit["score"] <= 1.0001
    assert hit["agent_id"] == "claude-code"


async def test_concurrent_identical_submissions_share_one_task(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("u")
    body = {"content": "Uses   pnpm, never npm", "user_id": user, "category": "workflow"}
    variants = [body, {**body, "content": "uses pnpm, NEVER npm"}]  # same normalised content
    resps = await asyncio.gather(*[client.post("/v1/memories/raw", json=variants[i % 2]) for i in range(12)])
    assert {r.status_code for r in resps} == {202}
    task_ids = {r.json()["task_id"] for r in resps}
    assert len(task_ids) == 1
    done = await wait_task(client, task_ids.pop())
    assert done["status"] == "completed"
    # a retry right after completion (inside IDEMPOTENCY_WINDOW_SECONDS) is still the same task
    again = await client.post("/v1/memories/raw", json=body)
    assert again.json()["task_id"] == done["task_id"]
    assert await deps.vectors.count(MemoryFilter(user_id=user)) == 1
    assert await probe.count_memories(deps.graph, user) == 1


async def test_different_category_or_scope_is_a_different_task(client: httpx.AsyncClient) -> None:
    user = unique("u")
    a = await client.post("/v1/memories/raw", json={"content": "x y z", "user_id": user, "category": "decision"})
    b = await client.post("/v1/memories/raw", json={"content": "x y z", "user_id": user, "category": "workflow"})
    c = await client.post(
        "/v1/memories/raw", json={"content": "x y z", "user_id": user, "category": "decision", "project_id": "p1"}
    )
    assert len({a.json()["task_id"], b.json()["task_id"], c.json()["task_id"]}) == 3
    for r in (a, b, c):
        assert (await wait_task(client, r.json()["task_id"]))["status"] == "completed"


async def test_unknown_task_is_404(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/memories/status/doesnotexist0000")
    assert resp.status_code == 404
    assert "unknown task" in resp.json()["detail"]


async def test_user_isolation_in_search(client: httpx.AsyncClient) -> None:
    alice, bob = unique("alice"), unique("bob")
    await write_raw(client, content="My bank PIN hint is the cat's name", user_id=alice, category="personal_fact")
    await write_raw(client, content="Likes hiking on weekends", user_id=bob, category="preference")
    resp = await client.post("/v1/search", json={"query": "bank PIN hint cat name", "user_id": bob, "limit": 50})
    contents = [r["content"] for r in resp.json()["results"]]
    assert contents == ["Likes hiking on weekends"]
    resp = await client.post("/v1/search", json={"query": "bank PIN", "user_id": unique("nobody")})
    assert resp.json()["results"] == []


async def test_project_search_covers_global_and_that_project_only(client: httpx.AsyncClient) -> None:
    user = unique("u")
    g = await write_raw(client, content="Prefers 4-space indentation", user_id=user, category="preference")
    p = await write_raw(client, content="Uses FastAPI with uvicorn", user_id=user, category="tech_stack",
                        project_id="proj-a")
    q = await write_raw(client, content="Uses Django with gunicorn", user_id=user, category="tech_stack",
                        project_id="proj-b")
    ids = {name: d["result"]["memories"][0]["id"] for name, d in {"g": g, "p": p, "q": q}.items()}
    assert p["result"]["memories"][0]["scope"] == "project"
    assert p["result"]["memories"][0]["project_id"] == "proj-a"

    with_project = await client.post(
        "/v1/search", json={"query": "uses indentation", "user_id": user, "project_id": "proj-a", "limit": 10}
    )
    got = {r["id"] for r in with_project.json()["results"]}
    assert got == {ids["g"], ids["p"]}

    global_only = await client.post("/v1/search", json={"query": "uses indentation", "user_id": user})
    assert {r["id"] for r in global_only.json()["results"]} == {ids["g"]}

    only_stack = await client.post(
        "/v1/search",
        json={"query": "uses", "user_id": user, "project_id": "proj-a", "categories": ["tech_stack"]},
    )
    assert {r["id"] for r in only_stack.json()["results"]} == {ids["p"]}


async def test_flexible_category_follows_project_id(client: httpx.AsyncClient) -> None:
    user = unique("u")
    with_p = await write_raw(client, content="Decided to use ruff", user_id=user, category="decision",
                             project_id="px")
    without = await write_raw(client, content="Decided to learn Rust", user_id=user, category="decision")
    assert with_p["result"]["memories"][0]["scope"] == "project"
    assert without["result"]["memories"][0]["scope"] == "global"
    forced = await write_raw(client, content="Prefers vim", user_id=user, category="preference",
                             scope="global", project_id="px")
    assert forced["result"]["memories"][0]["scope"] == "global"
    assert forced["result"]["memories"][0]["project_id"] is None


async def test_a_batch_is_one_task_whose_memories_are_in_both_stores_in_order(client: httpx.AsyncClient,
                                                                               deps: Deps) -> None:
    user = unique("batch")
    items = [
        {"content": "Prefers Zig for small command-line tools", "category": "preference"},
        {"content": "The build uses Bazel remote caching", "category": "tech_stack", "project_id": "p-batch"},
        {"content": "Met Priya Raman at the Lisbon meetup", "category": "personal_fact", "agent_id": "cursor",
         "occurred_at": "2026-03-04T10:00:00Z"},
        {"content": "prefers  zig for small command-line TOOLS", "category": "preference"},  # repeats the first
    ]
    resp = await client.post("/v1/memories/raw/batch", json={"user_id": user, "memories": items})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    stored = done["result"]["memories"]
    assert [m["content"] for m in stored] == [i["content"] for i in items[:3]]  # the repeat is stored once
    assert [m["scope"] for m in stored] == ["global", "project", "global"]
    assert stored[1]["project_id"] == "p-batch"
    third = (await client.get(f"/v1/memories/{stored[2]['id']}", params={"user_id": user})).json()
    assert third["agent_id"] == "cursor"
    assert stored[2]["occurred_at"].startswith("2026-03-04T10:00:00")
    assert len({m["id"] for m in stored}) == 3
    assert done["result"]["graph"] == "stored"
    assert await deps.vectors.count(MemoryFilter(user_id=user, all_scopes=True)) == 3
    assert await probe.count_memories(deps.graph, user) == 3
    found = (await client.post("/v1/search", json={"query": "Bazel remote caching", "user_id": user,
                                                   "project_id": "p-batch"})).json()
    assert found["results"][0]["id"] == stored[1]["id"]
    # the same batch again, inside the idempotency window, is the same task
    again = await client.post("/v1/memories/raw/batch", json={"user_id": user, "memories": items})
    assert again.json()["task_id"] == done["task_id"]


async def test_a_batch_names_the_item_it_rejects_and_stores_nothing(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("batchbad")
    good = {"content": "Prefers tabs in Go files", "category": "preference"}

    async def post(memories: list[dict[str, Any]]) -> httpx.Response:
        return await client.post("/v1/memories/raw/batch", json={"user_id": user, "memories": memories})

    empty = await post([good, {"content": "   ", "category": "preference"}])
    assert empty.status_code == 400 and "memories[1]: content is empty" in empty.text
    huge = await post([good, good, {"content": "x" * 9000, "category": "preference"}])
    assert huge.status_code == 413 and "memories[2]:" in huge.text and "MAX_CONTENT_CHARS" in huge.text
    bad_category = await post([{"content": "Knows Elixir", "category": "no_such_category"}])
    assert bad_category.status_code == 400 and "memories[0]:" in bad_category.text
    folding = await post([{**good, "metadata": {"fold_key": "edit:a.go", "session_id": "s1"}}])
    assert folding.status_code == 400 and "POST /v1/memories/raw" in folding.text
    assert (await post([])).status_code == 422
    assert (await post([good] * 101)).status_code == 422
    assert (await client.post("/v1/memories/raw/batch", json={"user_id": user, "memories": [
        {**good, "user_id": user}]})).status_code == 422  # the batch names its user once
    assert await deps.vectors.count(MemoryFilter(user_id=user, all_scopes=True)) == 0
