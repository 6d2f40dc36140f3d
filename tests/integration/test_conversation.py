"""POST /v1/memories through the offline extractor: categorised memories in Qdrant, entities and
relations in Neo4j, every message kept verbatim in interaction windows beside the facts, source message
ids, replays that change nothing."""

from __future__ import annotations

import httpx

from scripts.bench import graph_probe as probe
from service.deps import Deps
from service.stores.vector import MemoryFilter
from service.tasks.jobs import ConversationJob
from tests.conftest import unique
from tests.integration.conftest import wait_task
from worker.handlers import job_handlers

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
    # assistant speculation ("you also like Java") is never a fact: it is kept as what the assistant said,
    # verbatim in the window of messages 0-1; message 2 (two facts, not one) is a window of its own
    assert all("Java" not in str(m["content"]) for m in memories if m["category"] != "interaction")
    windows = [m for m in memories if m["category"] == "interaction"]
    assert [(m["content"], m["source_message_ids"], m["scope"]) for m in windows] == [
        (f"user: {CONVERSATION[0]['content']}\nassistant: {CONVERSATION[1]['content']}", ["0", "1"], "project"),
        (f"user: {CONVERSATION[2]['content']}", ["2"], "project"),
    ]
    assert memories[-2:] == windows  # facts first, then the windows
    facts = memories[:-2]
    assert len(facts) == 4 and all(m["source_message_ids"] in (["0"], ["2"]) for m in facts)
    assert "preference" in by_category
    assert all(m["scope"] == "global" and m["project_id"] is None for m in by_category["preference"])
    project_facts = [m for m in memories if m["scope"] == "project"]
    assert project_facts and all(m["project_id"] == "shop-api" for m in project_facts)

    # stored in both stores, with provenance
    assert await deps.vectors.count(MemoryFilter(user_id=user, project_id="shop-api")) == len(memories)
    assert await probe.count_memories(deps.graph, user) == len(memories)
    stored = await deps.vectors.get([str(m["id"]) for m in memories])
    assert {s.agent_id for s in stored} == {"cursor"}
    assert {s.task_id for s in stored} == {done["task_id"]}

    entities = {str(e["name"]).casefold() for e in await probe.entities(deps.graph, user)}
    assert {"fastapi", "postgresql", "acme corp"} <= entities
    relations = await probe.relations(deps.graph, user)
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
              await probe.count_memories(deps.graph, user), await probe.entities(deps.graph, user),
              await probe.relations(deps.graph, user))
    # Re-run the very job the worker ran (what ARQ does after a crash).
    job = ConversationJob(accepted_at="2026-01-01T00:00:00+00:00", user_id=user, project_id="p1", agent_id=None,
                          metadata={}, messages=CONVERSATION)
    await job_handlers(deps).writes.conversation(str(done["task_id"]), job)
    after = (await deps.vectors.count(MemoryFilter(user_id=user, project_id="p1")),
             await probe.count_memories(deps.graph, user), await probe.entities(deps.graph, user),
             await probe.relations(deps.graph, user))
    assert after[0] == before[0] and after[1] == before[1]
    assert after[2] == before[2]
    assert [(r["id"], r["memory_ids"]) for r in after[3]] == [(r["id"], r["memory_ids"]) for r in before[3]]


SMALL_TALK = [
    {"id": "m-1", "role": "user", "content": "Hello there! How are you?", "timestamp": "2025-06-01T09:00:00Z"},
    {"id": "m-2", "role": "assistant", "content": "Fine, thanks.", "timestamp": "2025-06-01T09:00:05Z"},
    {"id": "m-3", "role": "user", "content": "What time is it?"},
    {"id": "m-4", "role": "assistant", "content": "Noon."},
    {"id": "m-5", "role": "user", "content": "ok cool", "timestamp": "sometime after lunch"},
]


async def test_a_conversation_without_facts_is_kept_as_interaction_windows(client: httpx.AsyncClient,
                                                                           deps: Deps) -> None:
    user = unique("smalltalk")
    done = await _submit(client, messages=SMALL_TALK, user_id=user)
    result = done["result"]
    assert isinstance(result, dict)
    # windows of at most 2 consecutive messages, in message order
    first, second, third = result["memories"]
    assert first["category"] == second["category"] == third["category"] == "interaction"
    assert first["scope"] == "global" and first["project_id"] is None  # flexible, no project
    assert first["content"] == "user: Hello there! How are you?\nassistant: Fine, thanks."
    assert first["source_message_ids"] == ["m-1", "m-2"]
    assert first["occurred_at"] == "2025-06-01T09:00:00+00:00"  # the window's first message
    assert second["content"] == "user: What time is it?\nassistant: Noon."
    assert second["source_message_ids"] == ["m-3", "m-4"]
    assert second["occurred_at"] == first["created_at"]  # no timestamp: the acceptance time
    assert third["content"] == "user: ok cool" and third["source_message_ids"] == ["m-5"]
    assert third["occurred_at"] == first["created_at"]  # unparseable timestamp: the acceptance time
    assert await deps.vectors.count(MemoryFilter(user_id=user)) == 3
    assert await probe.count_memories(deps.graph, user) == 3

    got = await client.get(f"/v1/memories/{first['id']}", params={"user_id": user})
    assert got.status_code == 200
    record = got.json()
    assert record["source_message_ids"] == ["m-1", "m-2"]
    assert record["occurred_at"] == "2025-06-01T09:00:00+00:00" and record["category"] == "interaction"

    # without ids, the messages are named by their 0-based index
    plain = [{"role": m["role"], "content": m["content"]} for m in SMALL_TALK]
    done = await _submit(client, messages=plain, user_id=unique("smalltalk-plain"), project_id="p9")
    memories = done["result"]["memories"]  # type: ignore[index]
    assert [m["source_message_ids"] for m in memories] == [["0", "1"], ["2", "3"], ["4"]]
    assert all(m["scope"] == "project" and m["project_id"] == "p9" for m in memories)


MIXED = [
    {"id": "a", "role": "user", "content": "Hey, can you look at the flaky login test?",
     "timestamp": "2025-06-02T10:00:00+02:00"},
    {"id": "b", "role": "assistant", "content": "Sure. It fails when the session cookie expires mid-run."},
    {"id": "c", "role": "user", "content": "Ok, go ahead and fix it."},
    {"id": "d", "role": "user", "content": "By the way, I prefer pytest over unittest.",
     "timestamp": "June 2, 2025 10:05"},
    {"id": "e", "role": "assistant", "content": "Noted, I will use pytest."},
    {"id": "f", "role": "user", "content": "Thanks!"},
    {"role": "user", "content": "We deploy to Fly.io on every merge to main."},
]


async def test_a_mixed_conversation_stores_facts_and_windows_with_their_sources(client: httpx.AsyncClient,
                                                                                deps: Deps) -> None:
    user = unique("mixed")
    done = await _submit(client, messages=MIXED, user_id=user, project_id="shop")
    memories = done["result"]["memories"]  # type: ignore[index]
    accepted = memories[0]["created_at"]
    got = [(m["category"], m["source_message_ids"], m["occurred_at"]) for m in memories]
    # facts first, then every message in windows that follow the turn (a message and the reply to it, never two
    # messages of one speaker), in message order, whichever messages facts came from (a window's time is its first
    # message's); the last message alone is its fact's text: not stored twice
    assert got == [
        ("preference", ["d"], "2025-06-02T10:05:00+00:00"),
        ("tech_stack", ["6"], accepted),
        ("interaction", ["a", "b"], "2025-06-02T08:00:00+00:00"),
        ("interaction", ["c"], accepted),
        ("interaction", ["d", "e"], "2025-06-02T10:05:00+00:00"),  # the first timestamp that parses
        ("interaction", ["f"], accepted),
    ]
    assert memories[0]["content"] == "I prefer pytest over unittest."
    assert memories[1]["content"] == "We deploy to Fly.io on every merge to main."
    assert memories[3]["content"] == "user: Ok, go ahead and fix it."
    assert memories[4]["content"] == ("user: By the way, I prefer pytest over unittest.\n"
                                      "assistant: Noted, I will use pytest.")
    assert memories[5]["content"] == "user: Thanks!"
    stored = {m.id: m for m in await deps.vectors.get([m["id"] for m in memories])}
    assert [stored[m["id"]].source_message_ids for m in memories] == [m["source_message_ids"] for m in memories]
    # a window is linked to what it mentions, but states no relation (its "I" may be the assistant)
    relations = await probe.relations(deps.graph, user)
    assert relations and all(m["id"] not in r["memory_ids"] for m in memories[2:] for r in relations)

    # a replay of the job writes the very same memories
    job = ConversationJob(accepted_at=accepted, user_id=user, project_id="shop", agent_id=None, metadata={},
                          messages=MIXED)
    replay = await job_handlers(deps).writes.conversation(str(done["task_id"]), job)
    assert replay["memories"] == memories
    assert await deps.vectors.count(MemoryFilter(user_id=user, project_id="shop")) == 6


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


async def test_a_graph_fact_is_valid_from_when_it_was_said_not_when_it_was_stored(client: httpx.AsyncClient,
                                                                                  deps: Deps) -> None:
    user = unique("valid-at")
    resp = await client.post("/v1/memories", json={"user_id": user, "messages": [
        {"role": "user", "content": "I live in Tokyo with my partner.", "timestamp": "2026-11-03T09:00:00Z"},
        {"role": "assistant", "content": "Noted.", "timestamp": "2026-11-03T09:00:05Z"}]})
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    relations = [r for r in await probe.relations(deps.graph, user) if r["predicate"] == "lives_in"]
    assert relations, await probe.relations(deps.graph, user)
    assert all(str(r["valid_at"]).startswith("2026-11-03") for r in relations), [r["valid_at"] for r in relations]
