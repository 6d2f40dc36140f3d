"""Retrieval step two through the API (real Redis, Neo4j, Qdrant Edge, ARQ worker; hash embedder, offline
extractor): a fact and the window it came from come back as one result (`also`), `source` names the retriever
kind, `include: ["facts"]` adds the supporting graph facts, and the context is ranked for the session within a
token budget counted by the embedder's tokenizer."""

from __future__ import annotations

from typing import Any

import httpx

from service.ai.tokens import HFTokenCounter, default_tokenizer
from service.deps import Deps
from tests.conftest import unique
from tests.integration.conftest import wait_task, write_raw

CONVERSATION = [
    {"role": "user", "content": "Hi! I prefer tabs over spaces. I work at Acme Corp as a backend engineer."},
    {"role": "assistant", "content": "Noted. I guess you also like Java?"},
    {"role": "user", "content": "In this project we use FastAPI and PostgreSQL. We decided to use Redis for caching."},
]


async def converse(client: httpx.AsyncClient, user: str, project: str | None = "shop-api") -> list[dict[str, Any]]:
    body: dict[str, Any] = {"messages": CONVERSATION, "user_id": user}
    if project:
        body["project_id"] = project
    resp = await client.post("/v1/memories", json=body)
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    memories: list[dict[str, Any]] = done["result"]["memories"]
    return memories


async def search(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/search", json=body)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    assert answer["degraded"] == []
    return answer


async def test_a_fact_and_its_window_come_back_as_one_result(client: httpx.AsyncClient) -> None:
    user = unique("collapse")
    memories = await converse(client, user)
    window = next(m for m in memories if m["category"] == "interaction" and m["source_message_ids"] == ["0", "1"])
    tabs = next(m for m in memories if m["category"] == "preference" and "tabs" in m["content"])
    assert tabs["source_message_ids"] == ["0"]

    answer = await search(client, user_id=user, project_id="shop-api", query="tabs or spaces", limit=10)
    ids = [r["id"] for r in answer["results"]]
    # the window covers the fact's message: it keeps the slot, the fact is folded into it
    assert window["id"] in ids and tabs["id"] not in ids
    slot = next(r for r in answer["results"] if r["id"] == window["id"])
    assert {"id": tabs["id"], "kind": "fact"} in slot["also"]
    folded = [f["id"] for r in answer["results"] for f in r["also"]]
    assert len(folded) == len(set(folded)) and not set(folded) & set(ids)
    # nothing returned is covered by another result of the same answer
    for r in answer["results"]:
        for other in answer["results"]:
            if r is not other and r["source_message_ids"]:
                assert not set(r["source_message_ids"]) <= set(other["source_message_ids"])
    # every memory of the write is listed once, in a slot or folded (the limit is not reached)
    assert set(ids) | set(folded) == {m["id"] for m in memories}

    flat = await search(client, user_id=user, project_id="shop-api", query="tabs or spaces", limit=10, collapse=False)
    flat_ids = [r["id"] for r in flat["results"]]
    assert window["id"] in flat_ids and tabs["id"] in flat_ids
    assert all(r["also"] == [] for r in flat["results"])


async def test_folded_results_take_no_slot(client: httpx.AsyncClient) -> None:
    user = unique("slots")
    memories = await converse(client, user)
    query = "tabs Acme FastAPI Redis PostgreSQL backend engineer"
    flat = await search(client, user_id=user, project_id="shop-api", query=query, limit=6, collapse=False)
    assert len(flat["results"]) == 6  # the write's facts and windows, each on its own
    answer = await search(client, user_id=user, project_id="shop-api", query=query, limit=2)
    # six memories come from two windows' messages: two slots, neither restating the other, the rest folded
    assert len(answer["results"]) == 2
    first, second = (set(r["source_message_ids"]) for r in answer["results"])
    assert not first & second
    held = {r["id"] for r in answer["results"]} | {f["id"] for r in answer["results"] for f in r["also"]}
    assert len(held) > 2 and held <= {m["id"] for m in memories}


async def test_raw_memories_never_fold_and_source_names_the_retriever(client: httpx.AsyncClient) -> None:
    user = unique("source")
    await write_raw(client, user_id=user, category="personal_fact", content="I work at Acme.")
    await write_raw(client, user_id=user, category="personal_fact", content="I work at Acme.  Really.")
    await write_raw(client, user_id=user, category="personal_fact", content="I live in Oslo")
    both = await search(client, user_id=user, query="work at Acme", limit=5)
    assert len(both["results"]) == 3 and all(r["also"] == [] for r in both["results"])
    assert all(r["source"] == "vector" for r in both["results"])  # dense and lexical found each of them
    graph = await search(client, user_id=user, query="Acme", retrievers=["graph"], limit=5)
    assert graph["results"] and all(r["source"] == "graph" for r in graph["results"])
    assert all({s["retriever"] for s in r["signals"]} == {"graph"} for r in graph["results"])


async def test_include_facts_adds_the_supporting_graph_facts_once(client: httpx.AsyncClient) -> None:
    user = unique("facts")
    memories = await converse(client, user)
    plain = await search(client, user_id=user, project_id="shop-api", query="Acme Corp", limit=5)
    assert plain["facts"] is None
    answer = await search(client, user_id=user, project_id="shop-api", query="Acme Corp", limit=5,
                          include=["facts"])
    assert [r["id"] for r in answer["results"]] == [r["id"] for r in plain["results"]]  # costs no slot
    facts = answer["facts"]
    assert facts, answer
    assert len({f["id"] for f in facts}) == len(facts)
    returned = {r["id"] for r in answer["results"]} | {f["id"] for r in answer["results"] for f in r["also"]}
    contents = {m["id"]: m["content"] for m in memories}
    for f in facts:
        assert f["source_entity"] and f["target_entity"] and f["predicate"] and f["valid_at"]
        assert f["invalid_at"] is None
        assert f["memory_ids"] and set(f["memory_ids"]) <= returned
        assert all(contents[mid].strip().rstrip(".").casefold() != f["fact"].casefold() for mid in f["memory_ids"])
    assert any(f["target_entity"].casefold() == "acme corp" for f in facts)


async def test_context_is_ranked_for_the_session_and_fits_max_tokens(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("ctx")
    memories = await converse(client, user)
    marker = await write_raw(client, user_id=user, category="interaction", project_id="shop-api",
                             content="Session s1 ended after 3 observations (project shop-api)")
    marker_id = marker["result"]["memories"][0]["id"]
    for i in range(12):
        await write_raw(client, user_id=user, category="domain_knowledge",
                        content=f"Note {i}: the tide tables of harbour {i} are published every spring by the port")
    windows = {m["id"] for m in memories if m["category"] == "interaction"}

    full = (await client.get("/v1/context/shop-api", params={"user_id": user})).json()
    listed = [m["id"] for g in full["categories"] for m in g["memories"]]
    assert sorted(listed) == sorted(full["order"])
    # every conversation window restates a listed fact: left out; the raw marker (no fact) stays, after the facts
    assert not windows & set(listed) and full["restated"] == len(windows)
    assert full["order"][-1] == marker_id
    # the project's memories before global ones
    project = {m["id"] for m in memories if m["project_id"] == "shop-api"} - windows
    first = full["order"][: len(project)]
    assert set(first) == project, (first, project)
    assert full["total"] == len(memories) + 13 and full["omitted"] == 0 and full["tokens"] is None

    counter = HFTokenCounter(default_tokenizer(), "all-MiniLM-L6-v2")  # type: ignore[arg-type]
    small = (await client.get("/v1/context/shop-api", params={"user_id": user, "max_tokens": 80})).json()
    assert small["max_tokens"] == 80 and small["tokenizer"] == "all-MiniLM-L6-v2"
    assert 0 < small["tokens"] <= 80
    assert small["omitted"] > 0 and len(small["order"]) + small["omitted"] == len(full["order"])
    assert small["order"] == [mid for mid in full["order"] if mid in set(small["order"])]
    md = await client.get("/v1/context/shop-api", params={"user_id": user, "max_tokens": 80, "format": "markdown"})
    assert md.status_code == 200
    assert counter.count(md.text) == small["tokens"] <= 80  # counted by the same tokenizer
    assert md.text.rstrip().endswith(f"_… {small['omitted']} more not shown (raise max_tokens)_")
    big = await client.get("/v1/context/shop-api", params={"user_id": user, "max_tokens": 5000, "format": "markdown"})
    assert "more not shown" not in big.text and big.text.count("\n- ") == len(full["order"])

    # a query's hits come first
    asked = (await client.get("/v1/context/shop-api", params={"user_id": user, "query": "tide tables harbour 7"})
             ).json()
    assert "harbour 7 " in next(m["content"] for g in asked["categories"] for m in g["memories"]
                                if m["id"] == asked["order"][0])

    # often retrieved first among equals: the global notes rank by recency and retrievals
    notes = [m["id"] for g in full["categories"] if g["category"] == "domain_knowledge" for m in g["memories"]]
    favourite = notes[-1]
    for _ in range(3):
        hits = await search(client, user_id=user, query="tide tables harbour", limit=1,
                            categories=["domain_knowledge"])
        favourite = hits["results"][0]["id"]
    await deps.usage.drain()
    again = (await client.get("/v1/context/shop-api", params={"user_id": user})).json()
    ranked_notes = [mid for mid in again["order"] if mid in set(notes)]
    assert ranked_notes[0] == favourite


async def test_the_global_context_and_an_empty_one(client: httpx.AsyncClient) -> None:
    user = unique("ctx-empty")
    empty = await client.get("/v1/context/global", params={"user_id": user, "max_tokens": 50, "format": "markdown"})
    assert empty.text == "# Memory context (global)\n_No memories yet._\n"
    await converse(client, user, project=None)
    glob = (await client.get("/v1/context/global", params={"user_id": user, "max_tokens": 50})).json()
    assert glob["tokens"] <= 50 and glob["order"]
    bad = await client.get("/v1/context/global", params={"user_id": user, "max_tokens": 10})
    assert bad.status_code == 422


async def test_a_relative_time_in_a_turn_is_anchored_to_the_session_date(client: httpx.AsyncClient) -> None:
    user = unique("anchor")
    said = "2023-05-08T13:56:00"
    resp = await client.post("/v1/memories", json={"user_id": user, "messages": [
        {"role": "user", "content": "Caroline: I went to a LGBTQ support group yesterday.", "timestamp": said},
        {"role": "user", "content": "Melanie: That sounds great, I love painting.", "timestamp": said}]})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    window = next(m for m in done["result"]["memories"] if m["source_message_ids"] == ["0", "1"])
    assert window["occurred_at"].startswith("2023-05-07T00:00:00")  # "yesterday" said on 8 May
    assert all(m["occurred_at"].startswith("2023-05-07") for m in done["result"]["memories"]
               if m["source_message_ids"] == ["0"])
    # the time retriever finds it by the day it happened
    answer = await search(client, user_id=user, query="support group on 7 May 2023", retrievers=["time"], limit=3)
    assert answer["time_window"]["start"].startswith("2023-05-07")
    assert window["id"] in [r["id"] for r in answer["results"]]


async def test_a_delete_forgets_the_retrieval_counts_of_what_it_deleted(client: httpx.AsyncClient,
                                                                        deps: Deps) -> None:
    user = unique("forget-counts")
    done = [await write_raw(client, content=text, user_id=user, category="domain_knowledge")
            for text in ("The harbour office opens at seven", "The ferry to the island leaves at nine")]
    ids = [d["result"]["memories"][0]["id"] for d in done]
    hits = await search(client, user_id=user, query="harbour office hours and the island ferry", limit=5)
    assert {r["id"] for r in hits["results"]} == set(ids)
    usage = deps.usage
    await usage.drain()
    assert set(await usage.counts(user)) == set(ids)

    one = await client.delete(f"/v1/memories/{ids[0]}", params={"user_id": user})
    assert (await wait_task(client, one.json()["task_id"]))["status"] == "completed"
    assert set(await usage.counts(user)) == {ids[1]}  # the deleted memory's count went with it

    everything = await client.post("/v1/memories/delete", json={"user_id": user, "all": True})
    assert everything.status_code == 202, everything.text
    assert (await wait_task(client, everything.json()["task_id"]))["status"] == "completed"
    assert not await deps.redis.exists(f"{deps.settings.redis.queue_name}:retrieved:{user}")
