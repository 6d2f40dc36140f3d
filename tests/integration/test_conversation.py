"""POST /v1/memories through the offline extractor: categorised memories in Qdrant, entities and
relations in Neo4j, replays that change nothing."""

from __future__ import annotations

import httpx

from service.deps import Deps
from service.jobs import ConversationJob
from service.stores.vector import MemoryFilter
from tests.conftest import unique
from tests.integration.conftest import wait_task

CONVERSATION = [
    {"role": "user", "content": "Hi! I prefer tabs over spaces. I work at Acme Corp as a backend engineer."},
    {"role": "assistant", "content": "Noted. I guess you also like Java?"},
    {"role": "user", "content": "In this project we use FastAPI and PostgreSQL. We decided to use Redis for caching."},
]


async def _submit(client: httpx.AsyncClient, **body: object) -> dict[str, object]:
    resp = await client.post("/v1/memories", json=body)
    assert resp.status_code == 202, resp.text
    accepted = resp.json()
    assert accepted["poll_url"] == f"/v1/memories/status/{accepted['task_id']}"
    done = await wait_task(client, accepted["task_id"])
    assert done["status"] == "completed", done
    return done


async def test_conversation_becomes_categorised_memories_and_a_graph(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("conv")
    done = await _submit(client, messages=CONVERSATION, user_id=user, project_id="shop-api", agent_id="cursor")
    result = done["result"]
    assert isinstance(result, dict)
    assert result["extractor"] == "offline"
    memories = result["memories"]
    assert memories, result
    by_category: dict[str, list[dict[str, object]]] = {}
    for m in memories:
        by_category.setdefault(str(m["category"]), []).append(m)
    # assistant speculation ("you also like Java") is never stored
    assert all("Java" not in str(m["content"]) for m in memories)
    assert "preference" in by_category
    assert all(m["scope"] == "global" and m["project_id"] is None for m in by_category["preference"])
    project_facts = [m for m in memories if m["scope"] == "project"]
    assert project_facts and all(m["project_id"] == "shop-api" for m in project_facts)

    # stored in both stores, with provenance
    assert await deps.vectors.count(MemoryFilter(user_id=user, project_id="shop-api")) == len(memories)
    assert await deps.graph.count_memories(user) == len(memories)
    stored = await deps.vectors.get([str(m["id"]) for m in memories])
    assert {s.agent_id for s in stored} == {"cursor"}
    assert {s.task_id for s in stored} == {done["task_id"]}

    entities = {str(e["name"]).casefold() for e in await deps.graph.entities(user)}
    assert {"fastapi", "postgresql", "acme corp"} <= entities
    relations = await deps.graph.relations(user)
    assert relations
    for r in relations:
        assert r["valid_at"] and r["invalid_at"] is None and r["expired_at"] is None
        assert set(r["memory_ids"]) <= {m["id"] for m in memories}  # type: ignore[call-overload]

    # searchable like any memory
    resp = await client.post("/v1/search", json={"query": "tabs or spaces", "user_id": user, "project_id": "shop-api"})
    assert any("tabs" in r["content"].lower() for r in resp.json()["results"])


async def test_replaying_a_conversation_job_changes_nothing(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("replay")
    done = await _submit(client, messages=CONVERSATION, user_id=user, project_id="p1")
    before = (await deps.vectors.count(MemoryFilter(user_id=user, project_id="p1")),
              await deps.graph.count_memories(user), await deps.graph.entities(user), await deps.graph.relations(user))
    # Re-run the very job the worker ran (what ARQ does after a crash).
    job = ConversationJob(accepted_at="2026-01-01T00:00:00+00:00", user_id=user, project_id="p1", agent_id=None,
                          metadata={}, messages=CONVERSATION)
    await deps.service.store_conversation(str(done["task_id"]), job)
    after = (await deps.vectors.count(MemoryFilter(user_id=user, project_id="p1")),
             await deps.graph.count_memories(user), await deps.graph.entities(user), await deps.graph.relations(user))
    assert after[0] == before[0] and after[1] == before[1]
    assert after[2] == before[2]
    assert [(r["id"], r["memory_ids"]) for r in after[3]] == [(r["id"], r["memory_ids"]) for r in before[3]]


async def test_conversation_without_facts_completes_empty(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("empty")
    done = await _submit(client, messages=[{"role": "user", "content": "Hello there! How are you?"},
                                           {"role": "assistant", "content": "Fine, thanks."}], user_id=user)
    assert done["result"]["memories"] == []  # type: ignore[index]
    assert await deps.vectors.count(MemoryFilter(user_id=user)) == 0


async def test_conversation_input_rules(client: httpx.AsyncClient) -> None:
    no_user_turn = await client.post("/v1/memories", json={"messages": [{"role": "assistant", "content": "hi"}],
                                                           "user_id": "u"})
    assert no_user_turn.status_code == 400
    assert "user" in no_user_turn.json()["detail"]
    empty = await client.post("/v1/memories", json={"messages": [], "user_id": "u"})
    assert empty.status_code == 422
    bad_role = await client.post("/v1/memories", json={"messages": [{"role": "robot", "content": "x"}], "user_id": "u"})
    assert bad_role.status_code == 422
    huge = [{"role": "user", "content": "x" * 20_000}] * 11
    too_big = await client.post("/v1/memories", json={"messages": huge, "user_id": "u"})
    assert too_big.status_code == 413
    assert "MAX_CONVERSATION_CHARS" in too_big.json()["detail"]
