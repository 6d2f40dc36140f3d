"""The identity and provenance routes through the whole app: a raw write's entity goes to the review
queue, a review merges it (visible in stats, listings and search), unmerge undoes it, and a traced search
records exactly what it returned until the trace expires."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from service.deps import Deps
from tests.conftest import unique
from tests.integration.conftest import write_raw


def memory_id(done: dict[str, Any]) -> str:
    return str(done["result"]["memories"][0]["id"])


async def stats(client: httpx.AsyncClient, user: str) -> dict[str, Any]:
    resp = await client.get("/v1/graph/stats", params={"user_id": user})
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


async def written_trace(client: httpx.AsyncClient, user: str, trace_id: str) -> dict[str, Any]:
    """Traces are written after the answer: poll (bounded) until it is readable."""
    for _ in range(200):
        resp = await client.get(f"/v1/traces/{trace_id}", params={"user_id": user})
        if resp.status_code == 200:
            body: dict[str, Any] = resp.json()
            return body
        assert resp.status_code == 404, resp.text
        await asyncio.sleep(0.05)
    raise AssertionError(f"trace {trace_id} never written")


async def test_review_queue_merge_unmerge_and_stats(client: httpx.AsyncClient) -> None:
    u = unique("cur")
    a = memory_id(await write_raw(client, user_id=u, content="I work with Jon Smith on the React app.",
                                  category="personal_fact"))
    b = memory_id(await write_raw(client, user_id=u, content="I work with Jon on the billing app.",
                                  category="personal_fact"))
    page = (await client.get("/v1/graph/duplicates", params={"user_id": u})).json()
    [pair] = page["items"]
    assert page["next_cursor"] is None
    assert (pair["source"]["name"], pair["target"]["name"]) == ("Jon", "Jon Smith")
    assert 0.85 <= pair["score"] < 0.95 and pair["source"]["mentions"] == 1
    source, target = pair["source"]["id"], pair["target"]["id"]
    s = await stats(client, u)
    assert (s["memories"], s["merged_entities"], s["same_as"]) == (2, 0, {"pending": 1, "confirmed": 0, "rejected": 0})

    bad = await client.post("/v1/graph/duplicates/review",
                            json={"user_id": u, "source_id": target, "target_id": unique("x"), "confirm": True})
    assert bad.status_code == 404
    done = await client.post("/v1/graph/duplicates/review",
                             json={"user_id": u, "source_id": source, "target_id": target, "confirm": True,
                                   "reviewer": "alice"})
    assert done.status_code == 200, done.text
    assert done.json() == {"status": "confirmed", "source_id": source, "target_id": target, "merged_into": target}
    s = await stats(client, u)
    assert s["merged_entities"] == 1 and s["same_as"]["confirmed"] == 1 and s["same_as"]["pending"] == 0
    nodes = {n["id"]: n for n in (await client.get("/v1/graph/nodes", params={"user_id": u})).json()["items"]}
    assert nodes[source]["merged_into"] == target and "Jon" in nodes[target]["aliases"]

    # the graph retriever reaches both memories from the target's name once they are one entity
    found = await client.post("/v1/search", json={"user_id": u, "query": "Jon Smith", "retrievers": ["graph"]})
    assert {a, b} <= {r["id"] for r in found.json()["results"]}

    # manual merge rules
    same = await client.post("/v1/graph/entities/merge", json={"user_id": u, "source_id": target, "target_id": target})
    assert same.status_code == 400
    into_merged = await client.post("/v1/graph/entities/merge",
                                    json={"user_id": u, "source_id": target, "target_id": source})
    assert into_merged.status_code == 409

    undone = await client.post(f"/v1/graph/entities/{source}/unmerge", json={"user_id": u})
    assert undone.status_code == 200 and undone.json()["status"] == "unmerged"
    s = await stats(client, u)
    assert s["merged_entities"] == 0 and s["same_as"]["pending"] == 1
    again = await client.post(f"/v1/graph/entities/{source}/unmerge", json={"user_id": u})
    assert again.status_code == 409

    rejected = await client.post("/v1/graph/duplicates/review",
                                 json={"user_id": u, "source_id": source, "target_id": target, "confirm": False})
    assert rejected.json()["status"] == "rejected"
    assert (await client.get("/v1/graph/duplicates", params={"user_id": u})).json()["items"] == []
    assert (await stats(client, u))["same_as"]["rejected"] == 1


async def test_duplicates_page_by_score(client: httpx.AsyncClient) -> None:
    u = unique("curpage")
    for text in ("I work with Ana Lima on the app.", "I work with Ana on the site.",
                 "I work with Bruno Costa on the app.", "I work with Bruno on the site.",
                 "I work with Carla Dias on the app.", "I work with Carla on the site."):
        await write_raw(client, user_id=u, content=text, category="personal_fact")
    seen: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10):
        params: dict[str, Any] = {"user_id": u, "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/graph/duplicates", params=params)).json()
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(p["target"]["name"] for p in seen) == ["Ana Lima", "Bruno Costa", "Carla Dias"]
    scores = [p["score"] for p in seen]
    assert scores == sorted(scores, reverse=True)


async def test_a_trace_lists_what_the_search_returned_and_expires(client: httpx.AsyncClient, deps: Deps) -> None:
    u = unique("trace")
    for text in ("I work with Jon Smith on the React app.", "Jon Smith prefers tea over coffee.",
                 "I deploy the shop to Kubernetes."):
        await write_raw(client, user_id=u, content=text, category="personal_fact")
    resp = await client.post("/v1/search", json={"user_id": u, "query": "Jon Smith", "trace": True, "limit": 5})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["results"] and body["trace_id"]
    trace = await written_trace(client, u, body["trace_id"])
    assert [(h["memory_id"], h["rank"]) for h in trace["returned"]] == [
        (r["id"], i) for i, r in enumerate(body["results"], 1)]
    assert [h["score"] for h in trace["returned"]] == [r["score"] for r in body["results"]]
    assert trace["query"] == "Jon Smith"
    at, expires = datetime.fromisoformat(trace["at"]), datetime.fromisoformat(trace["expires_at"])
    assert expires - at == timedelta(days=deps.settings.retention.trace_ttl_days)
    nodes = {n["name"]: n["id"] for n in (await client.get("/v1/graph/nodes", params={"user_id": u})).json()["items"]}
    assert nodes["Jon Smith"] in {e["entity_id"] for e in trace["touched"]}
    listed = (await client.get("/v1/traces", params={"user_id": u, "entity_id": nodes["Jon Smith"]})).json()
    assert [t["id"] for t in listed["items"]] == [body["trace_id"]]
    assert (await client.get("/v1/traces", params={"user_id": u})).json()["items"][0]["id"] == body["trace_id"]
    # another user cannot read it; a search without trace records none
    assert (await client.get(f"/v1/traces/{body['trace_id']}", params={"user_id": unique("other")})).status_code == 404
    plain = (await client.post("/v1/search", json={"user_id": u, "query": "Jon Smith"})).json()
    assert plain["trace_id"] is None
    assert (await stats(client, u))["traces"] == 1

    # expiry: the cron's purge past the TTL removes it
    later = (datetime.now(UTC) + timedelta(days=deps.settings.retention.trace_ttl_days, hours=1)).isoformat()
    assert await deps.graph.traces.purge_traces(later) >= 1
    assert (await client.get(f"/v1/traces/{body['trace_id']}", params={"user_id": u})).status_code == 404
    assert (await client.get("/v1/traces", params={"user_id": u})).json()["items"] == []
