"""Read side and lifecycle: listing, single-memory routes, update/delete through the queue,
temporal facts in the graph, context, graph introspection, and user isolation on every route."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from scripts.bench import graph_probe as probe
from service.deps import Deps
from tests.conftest import unique
from tests.integration.conftest import wait_task, write_raw


async def _mid(client: httpx.AsyncClient, **body: Any) -> str:
    done = await write_raw(client, **body)
    return str(done["result"]["memories"][0]["id"])


async def _accepted(resp: httpx.Response, client: httpx.AsyncClient) -> dict[str, Any]:
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    return done


async def _all_pages(client: httpx.AsyncClient, url: str, params: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        resp = await client.get(url, params={**params, **({"cursor": cursor} if cursor else {})})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        items += body[key]
        cursor = body["next_cursor"]
        if cursor is None:
            return items
    raise AssertionError("pagination did not end")


async def test_list_filters_and_pages(client: httpx.AsyncClient) -> None:
    user = unique("list")
    ids = {
        "pref": await _mid(client, content="Prefers dark mode", user_id=user, category="preference"),
        "skill": await _mid(client, content="Knows Rust well", user_id=user, category="technical_skill",
                            agent_id="cursor"),
        "p1": await _mid(client, content="Uses FastAPI", user_id=user, category="tech_stack", project_id="p1"),
        "p1b": await _mid(client, content="Snake case columns", user_id=user, category="convention",
                          project_id="p1"),
        "p2": await _mid(client, content="Uses Django", user_id=user, category="tech_stack", project_id="p2"),
    }
    everything = await _all_pages(client, "/v1/memories", {"user_id": user, "limit": 2}, "memories")
    assert [m["id"] for m in everything] == list(reversed(ids.values()))  # newest first: written one by one
    by_id = await _all_pages(client, "/v1/memories", {"user_id": user, "limit": 2, "order": "id"}, "memories")
    assert [m["id"] for m in by_id] == sorted(ids.values())

    async def listed(**params: Any) -> set[str]:
        return {m["id"] for m in await _all_pages(client, "/v1/memories", {"user_id": user, **params}, "memories")}

    assert await listed(scope="global") == {ids["pref"], ids["skill"]}
    assert await listed(project_id="p1") == {ids["pref"], ids["skill"], ids["p1"], ids["p1b"]}
    assert await listed(scope="project") == {ids["p1"], ids["p1b"], ids["p2"]}
    assert await listed(category="tech_stack") == {ids["p1"], ids["p2"]}
    assert await listed(agent_id="cursor") == {ids["skill"]}
    bad = await client.get("/v1/memories", params={"user_id": user, "category": "nope"})
    assert bad.status_code == 400
    unnamed = await client.get("/v1/memories")  # without a key (AUTH_MODE=none): DEFAULT_USER_ID's memories
    assert unnamed.status_code == 200 and {m["user_id"] for m in unnamed.json()["memories"]} <= {"default_user"}


async def test_listing_is_newest_first_with_ties_by_id_across_pages(client: httpx.AsyncClient) -> None:
    """A batch's memories share their acceptance time: pages of 2 walk them by id, between the newer and the older
    single writes, each memory once; oldest first reverses the times only; a cursor keeps its order."""
    user = unique("newest")
    first = await _mid(client, content="Uses Postgres 16", user_id=user, category="tech_stack", project_id="p")
    resp = await client.post("/v1/memories/raw/batch", json={"user_id": user, "memories": [
        {"content": f"Convention number {i}: snake case", "category": "convention", "project_id": "p"}
        for i in range(5)]})
    assert resp.status_code == 202, resp.text
    batch = [m["id"] for m in (await wait_task(client, resp.json()["task_id"]))["result"]["memories"]]
    last = await _mid(client, content="Prefers short answers", user_id=user, category="preference")
    newest = await _all_pages(client, "/v1/memories", {"user_id": user, "limit": 2}, "memories")
    assert [m["id"] for m in newest] == [last, *sorted(batch), first]
    assert len({m["created_at"] for m in newest if m["id"] in batch}) == 1
    oldest = await _all_pages(client, "/v1/memories", {"user_id": user, "limit": 2, "order": "oldest"}, "memories")
    assert [m["id"] for m in oldest] == [first, *sorted(batch), last]

    page = (await client.get("/v1/memories", params={"user_id": user, "limit": 3})).json()
    assert [m["id"] for m in page["memories"]] == [last, *sorted(batch)[:2]]
    rest = (await client.get("/v1/memories", params={"user_id": user, "cursor": page["next_cursor"]})).json()
    assert [m["id"] for m in rest["memories"]] == [*sorted(batch)[2:], first]  # the cursor's own order
    other = await client.get("/v1/memories", params={"user_id": user, "cursor": page["next_cursor"], "order": "id"})
    assert other.status_code == 400 and "cursor" in other.json()["detail"]
    ids = sorted([first, *batch, last])  # an id cursor (the order before newest first) goes on by id
    by_id = (await client.get("/v1/memories", params={"user_id": user, "cursor": ids[3]})).json()
    assert [m["id"] for m in by_id["memories"]] == ids[3:]


async def test_pagination_is_stable_under_concurrent_writes(client: httpx.AsyncClient) -> None:
    user = unique("stable")
    original = set()
    for i in range(20):
        original.add(await _mid(client, content=f"original fact {i}", user_id=user, category="decision"))

    async def writer() -> None:
        for i in range(15):
            resp = await client.post("/v1/memories/raw",
                                     json={"content": f"late fact {i}", "user_id": user, "category": "decision"})
            assert resp.status_code == 202

    seen: list[str] = []
    cursor = None
    task = asyncio.create_task(writer())
    for _ in range(100):
        params: dict[str, Any] = {"user_id": user, "limit": 3}
        if cursor:
            params["cursor"] = cursor
        body = (await client.get("/v1/memories", params=params)).json()
        seen += [m["id"] for m in body["memories"]]
        cursor = body["next_cursor"]
        await asyncio.sleep(0.01)
        if cursor is None:
            break
    await task
    assert len(seen) == len(set(seen)), "a memory was returned twice"
    assert original <= set(seen), "a memory that existed before the walk was skipped"


async def test_get_update_delete_one_memory(client: httpx.AsyncClient, deps: Deps) -> None:
    user, other = unique("crud"), unique("intruder")
    mid = await _mid(client, content="Uses black for formatting", user_id=user, category="workflow")

    got = await client.get(f"/v1/memories/{mid}", params={"user_id": user})
    assert got.status_code == 200
    assert got.json()["content"] == "Uses black for formatting" and got.json()["user_id"] == user
    assert (await client.get(f"/v1/memories/{mid}", params={"user_id": other})).status_code == 404
    assert (await client.get("/v1/memories/00000000-0000-0000-0000-000000000000")).status_code == 404
    assert (await client.put(f"/v1/memories/{mid}", json={"content": "x", "user_id": other})).status_code == 404
    assert (await client.delete(f"/v1/memories/{mid}", params={"user_id": other})).status_code == 404

    put = await client.put(f"/v1/memories/{mid}", json={"content": "Uses ruff format for formatting",
                                                        "user_id": user})
    done = await _accepted(put, client)
    assert done["result"]["memories"][0]["id"] == mid
    got = (await client.get(f"/v1/memories/{mid}")).json()
    assert got["content"] == "Uses ruff format for formatting"
    assert got["updated_at"] > got["created_at"]
    hits = (await client.post("/v1/search", json={"query": "ruff format formatting", "user_id": user})).json()
    vector_hits = [r for r in hits["results"] if r["source"] == "vector"]
    assert vector_hits[0]["id"] == mid and "ruff" in vector_hits[0]["content"]

    bad_category = await client.put(f"/v1/memories/{mid}", json={"content": "y", "category": "nope"})
    assert bad_category.status_code == 400

    deleted = await _accepted(await client.delete(f"/v1/memories/{mid}", params={"user_id": user}), client)
    assert deleted["result"]["deleted"] == [mid]
    assert (await client.get(f"/v1/memories/{mid}")).status_code == 404
    hits = (await client.post("/v1/search", json={"query": "ruff format formatting", "user_id": user})).json()
    assert all(r["id"] != mid for r in hits["results"])
    assert await probe.count_memories(deps.graph, user) == 0
    episodes = (await client.get("/v1/graph/episodes", params={"user_id": user})).json()["items"]
    assert [e["id"] for e in episodes] == [mid] and episodes[0]["deleted_at"]


async def test_update_invalidates_the_contradicted_edge(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("update")
    mid = await _mid(client, content="I work at Acme Corp", user_id=user, category="personal_fact")
    before = {(r["source"], r["predicate"], r["target"]): r for r in await probe.relations(deps.graph, user)}
    assert ("user", "works_at", "Acme Corp") in before

    await _accepted(await client.put(f"/v1/memories/{mid}", json={"content": "I work at Globex"}), client)
    after = {(r["source"], r["predicate"], r["target"]): r for r in await probe.relations(deps.graph, user)}
    old = after[("user", "works_at", "Acme Corp")]
    assert old["invalid_at"] and old["expired_at"]  # history kept, not deleted
    assert after[("user", "works_at", "Globex")]["invalid_at"] is None

    current = (await client.post("/v1/graph/search", json={"query": "work", "user_id": user})).json()["results"]
    assert {f["target"] for f in current} == {"Globex"}
    history = (await client.post("/v1/graph/search",
                                 json={"query": "work", "user_id": user, "include_history": True})).json()["results"]
    assert {f["target"] for f in history} == {"Globex", "Acme Corp"}
    acme = next(f for f in history if f["target"] == "Acme Corp")
    assert acme["invalid_at"] and acme["source"] == "user" and acme["predicate"] == "works_at"


async def test_newer_fact_replaces_older_for_single_valued_predicates(client: httpx.AsyncClient,
                                                                      deps: Deps) -> None:
    user = unique("tz")
    await write_raw(client, content="My timezone is Europe/Berlin", user_id=user, category="personal_fact")
    await write_raw(client, content="My timezone is America/New_York", user_id=user, category="personal_fact")
    rels = {r["target"]: r for r in await probe.relations(deps.graph, user) if r["predicate"] == "has_timezone"}
    assert rels["Europe/Berlin"]["invalid_at"] == rels["America/New_York"]["valid_at"]
    assert rels["America/New_York"]["invalid_at"] is None
    # a multi-valued predicate keeps both
    await write_raw(client, content="I know Rust", user_id=user, category="technical_skill")
    await write_raw(client, content="I know Go", user_id=user, category="technical_skill")
    knows = [r for r in await probe.relations(deps.graph, user) if r["predicate"] == "knows"]
    assert len(knows) == 2 and all(r["invalid_at"] is None for r in knows)
    edges = (await client.get("/v1/graph/edges", params={"user_id": user})).json()["items"]
    assert "Europe/Berlin" not in {e["target"] for e in edges}
    with_history = (await client.get("/v1/graph/edges", params={"user_id": user, "include_history": True})).json()
    assert "Europe/Berlin" in {e["target"] for e in with_history["items"]}


async def test_delete_expires_only_exclusive_edges(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("del")
    a = await _mid(client, content="We use FastAPI and Redis", user_id=user, category="tech_stack", project_id="shop")
    await _mid(client, content="The shop runs on FastAPI", user_id=user, category="tech_stack", project_id="shop")
    edges = {r["target"]: r for r in await probe.relations(deps.graph, user) if r["source"] == "shop"}
    assert len(edges["FastAPI"]["memory_ids"]) == 2 and edges["Redis"]["memory_ids"] == [a]

    await _accepted(await client.delete(f"/v1/memories/{a}"), client)
    edges = {r["target"]: r for r in await probe.relations(deps.graph, user) if r["source"] == "shop"}
    # deleting erases: the edge only `a` stated goes with the entity only `a` named
    assert "Redis" not in edges
    assert edges["FastAPI"]["expired_at"] is None and a not in edges["FastAPI"]["memory_ids"]


async def test_bulk_delete(client: httpx.AsyncClient) -> None:
    user, bystander = unique("bulk"), unique("bystander")
    keep = await _mid(client, content="Prefers vim", user_id=user, category="preference")
    for i in range(3):
        await _mid(client, content=f"task note {i}", user_id=user, category="task_context")
    other = await _mid(client, content="task note 0", user_id=bystander, category="task_context")

    nothing = await client.post("/v1/memories/delete", json={"user_id": user})
    assert nothing.status_code == 400 and "all=true" in nothing.json()["detail"]
    done = await _accepted(await client.post("/v1/memories/delete",
                                             json={"user_id": user, "category": "task_context"}), client)
    assert len(done["result"]["deleted"]) == 3
    left = await _all_pages(client, "/v1/memories", {"user_id": user}, "memories")
    assert [m["id"] for m in left] == [keep]

    by_ids = await _accepted(await client.post("/v1/memories/delete", json={"user_id": user, "memory_ids": [other]}),
                             client)
    assert by_ids["result"]["deleted"] == []  # another user's id is never deleted
    wiped = await _accepted(await client.post("/v1/memories/delete", json={"user_id": user, "all": True}), client)
    assert wiped["result"]["deleted"] == [keep]
    assert (await client.get(f"/v1/memories/{other}")).status_code == 200


async def test_context_groups_by_category_and_bounds_markdown(client: httpx.AsyncClient) -> None:
    user = unique("ctx")
    await write_raw(client, content="Prefers tabs", user_id=user, category="preference")
    await write_raw(client, content="Works in Berlin", user_id=user, category="personal_fact")
    await write_raw(client, content="Uses FastAPI", user_id=user, category="tech_stack", project_id="app")
    await write_raw(client, content="Tests live in tests/", user_id=user, category="convention", project_id="app")
    await write_raw(client, content="Uses Rails", user_id=user, category="tech_stack", project_id="other")
    for i in range(30):
        await write_raw(client, content=f"Decision number {i} about the app", user_id=user, category="decision",
                        project_id="app")

    ctx = (await client.get("/v1/context/app", params={"user_id": user})).json()
    order = [g["category"] for g in ctx["categories"]]
    assert order == ["preference", "personal_fact", "tech_stack", "convention", "decision"]
    contents = {m["content"] for g in ctx["categories"] for m in g["memories"]}
    assert "Uses FastAPI" in contents and "Prefers tabs" in contents and "Uses Rails" not in contents
    assert ctx["total"] == 34

    glob = (await client.get("/v1/context/global", params={"user_id": user})).json()
    assert [g["category"] for g in glob["categories"]] == ["preference", "personal_fact"]

    md = await client.get("/v1/context/app", params={"user_id": user, "format": "markdown", "max_chars": 400})
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    assert len(md.text) <= 400
    # the most useful first, under their category's heading, each dated (the preference no longer fits in 400)
    assert md.text.startswith("# Memory context (project app)\n## Decision\n- Decision number 29")
    assert "(said " in md.text
    assert "more not shown" in md.text
    full = await client.get("/v1/context/app", params={"user_id": user, "format": "markdown", "max_chars": 20000})
    assert "more not shown" not in full.text and full.text.count("\n- ") == 34


async def test_merged_search_interleaves_vector_and_graph(client: httpx.AsyncClient) -> None:
    user = unique("merge")
    await write_raw(client, content="We deploy the shop to Kubernetes", user_id=user, category="architecture",
                    project_id="shop")
    await write_raw(client, content="I prefer PostgreSQL over MySQL", user_id=user, category="preference")
    body = (await client.post("/v1/search", json={"query": "PostgreSQL Kubernetes", "user_id": user,
                                                  "project_id": "shop", "limit": 10})).json()
    sources = [r["source"] for r in body["results"]]
    assert body["degraded"] == []
    assert "vector" in sources
    # graph facts never repeat a memory returned as a vector result
    vector_ids = {r["id"] for r in body["results"] if r["source"] == "vector"}
    for r in body["results"]:
        if r["source"] == "graph":
            assert not vector_ids.intersection(r["memory_ids"])
    # interleaving: no two graph results in a row while vector results remain
    for i in range(len(sources) - 1):
        if sources[i] == sources[i + 1] == "graph":
            assert "vector" not in sources[i:]

    # with a limit smaller than the vector results, a graph fact the memories do not state still shows
    only_graph = (await client.post("/v1/graph/search", json={"query": "PostgreSQL", "user_id": user})).json()
    assert any(f["target"] == "PostgreSQL" for f in only_graph["results"])


async def test_users_never_see_each_other_on_read_routes(client: httpx.AsyncClient) -> None:
    alice, bob = unique("alice"), unique("bob")
    secret = await _mid(client, content="I work at Initech on project Zeta", user_id=alice, category="personal_fact")
    await write_raw(client, content="I work at Hooli", user_id=bob, category="personal_fact")
    routes: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/v1/memories", {"user_id": bob}),
        ("GET", "/v1/context/global", {"user_id": bob}),
        ("GET", "/v1/graph/nodes", {"user_id": bob}),
        ("GET", "/v1/graph/edges", {"user_id": bob, "include_history": True}),
        ("GET", "/v1/graph/episodes", {"user_id": bob}),
    ]
    for _, url, params in routes:
        text = (await client.get(url, params=params)).text
        assert "Initech" not in text and secret not in text, url
    for url in ("/v1/search", "/v1/graph/search"):
        text = (await client.post(url, json={"query": "Initech Zeta", "user_id": bob})).text
        assert "Initech" not in text, url
