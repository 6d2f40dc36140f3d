"""Sensitivity tiers: a key's ceiling, a read's own lower ceiling, and a walk of every read route
with a low-ceiling key that never finds a secret memory (its words, its id, the facts only it supports).

The walk reads the app's own route table, so a read route added later is walked without editing this file."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.api.security import PUBLIC_PATHS
from service.core.auth import READ_POSTS, ApiKeyStore
from service.deps import Deps
from tests.conftest import unique
from tests.integration.conftest import running_app

WORD = "zorblax"  # only in the secret memory (and what the graph derives from it)
SECRET = "Priya Zorblax works at Quuxcorp Clinic in Reykjavik and her locker code is zorblax-4711."
PUBLIC = "The team prefers green tea in the Reykjavik office."
READ_BODIES: dict[str, dict[str, Any]] = {
    "/v1/search": {"query": "Zorblax Quuxcorp Reykjavik locker code", "include": ["traces", "messages", "entities"]},
    "/v1/graph/search": {"query": "Zorblax Quuxcorp Reykjavik"},
    "/v1/graph/query": {},
    "/v1/conversations/search": {"query": "Zorblax"},
    "/v1/runs/search": {"query": "Zorblax"},
}


class Tiered:
    def __init__(self, client: httpx.AsyncClient, deps: Deps, user: str, keys: dict[str, str],
                 ids: dict[str, str]) -> None:
        self.client, self.deps, self.user, self.keys, self.ids = client, deps, user, keys, ids

    def h(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}


async def _wait(c: httpx.AsyncClient, task_id: str, headers: dict[str, str]) -> dict[str, Any]:
    for _ in range(600):
        body: dict[str, Any] = (await c.get(f"/v1/memories/status/{task_id}", headers=headers)).json()
        if body["status"] in ("completed", "failed"):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} did not end")


@pytest.fixture(scope="module")
async def tiered(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Tiered]:
    async with running_app(tmp_path_factory.mktemp("tiers"), auth_mode="keys", rate_limit_reads_per_minute=0,
                           rate_limit_writes_per_minute=0) as (c, deps):
        store = ApiKeyStore(deps.redis, deps.settings.redis)
        user = unique("ut")
        keys = {"full": (await store.create(user, "every tier"))[1],
                "low": (await store.create(user, "internal and below", max_sensitivity="internal"))[1],
                "public": (await store.create(user, "public only", max_sensitivity="public"))[1]}
        full = {"Authorization": f"Bearer {keys['full']}"}
        ids: dict[str, str] = {}
        for name, body in (("secret", {"content": SECRET, "category": "personal_fact", "sensitivity": "secret"}),
                           ("public", {"content": PUBLIC, "category": "preference", "sensitivity": "public"}),
                           ("internal", {"content": "The Reykjavik office opens at nine.",
                                         "category": "domain_knowledge"})):
            resp = await c.post("/v1/memories/raw", json=body, headers=full)
            assert resp.status_code == 202, resp.text
            done = await _wait(c, resp.json()["task_id"], full)
            assert done["status"] == "completed", done
            ids[f"{name}_memory"] = done["result"]["memories"][0]["id"]
            ids[f"{name}_task"] = resp.json()["task_id"]
        # a fact only a secret memory supports, and one a secret and an internal memory both state
        for body in ({"subject": "Priya Zorblax", "predicate": "works_at", "object": "Quuxcorp Clinic",
                      "sensitivity": "secret"},
                     {"subject": "Reykjavik office", "predicate": "located_in", "object": "Iceland",
                      "sensitivity": "secret"},
                     {"subject": "Reykjavik office", "predicate": "located_in", "object": "Iceland"}):
            resp = await c.post("/v1/graph/facts", json=body, headers=full)
            assert resp.status_code == 202, resp.text
            done = await _wait(c, resp.json()["task_id"], full)
            assert done["status"] == "completed", done
        ids["fact_task"] = resp.json()["task_id"]
        # a conversation whose personal fact is private (the extractor's tier): its messages and its window too
        resp = await c.post("/v1/memories", json={"session_id": "s1", "messages": [
            {"role": "user", "content": "My middle name is Zorblax and I am allergic to penicillin."}]}, headers=full)
        assert resp.status_code == 202, resp.text
        done = await _wait(c, resp.json()["task_id"], full)
        assert done["status"] == "completed", done
        ids["conversation"] = json.dumps(done["result"]["memories"])
        traced = await c.post("/v1/search", json={"query": "Zorblax locker code", "trace": True}, headers=full)
        assert traced.status_code == 200 and WORD in traced.text.lower()
        ids["trace_id"] = traced.json()["trace_id"]
        for _ in range(200):  # traces are written after the search answers
            if (await c.get(f"/v1/traces/{ids['trace_id']}", headers=full)).status_code == 200:
                break
            await asyncio.sleep(0.05)
        nodes = (await c.get("/v1/graph/nodes", params={"limit": 200}, headers=full)).json()["items"]
        ids["entity_id"] = next((n["id"] for n in nodes if WORD in n["name"].lower()), "none")
        yield Tiered(c, deps, user, keys, ids)


def _fill(path: str, ids: dict[str, str]) -> str:
    names = {"session_id": "s1", "memory_id": ids["secret_memory"], "task_id": ids["secret_task"],
             "trace_id": ids["trace_id"], "entity_id": ids["entity_id"], "project_id": "p1", "seq": "0"}
    return re.sub(r"\{(\w+)\}", lambda m: names.get(m.group(1), "none"), path)


async def test_the_secret_memory_is_stored_with_its_tier_and_seen_by_a_key_without_a_ceiling(tiered: Tiered
                                                                                             ) -> None:
    c, full = tiered.client, tiered.h("full")
    got = await c.get(f"/v1/memories/{tiered.ids['secret_memory']}", headers=full)
    assert got.status_code == 200 and got.json()["sensitivity"] == "secret"
    assert (await c.get(f"/v1/memories/{tiered.ids['internal_memory']}", headers=full)).json()["sensitivity"] == \
        "internal"
    # the graph derived entities from it: the walk below has something to miss
    assert tiered.ids["entity_id"] != "none"
    conversation = json.loads(tiered.ids["conversation"])
    assert {m["category"] for m in conversation} >= {"personal_fact", "interaction"}, conversation
    assert {m["sensitivity"] for m in conversation} == {"private"}, conversation
    messages = await c.get("/v1/conversations/s1", headers=full)
    assert WORD in messages.text.lower()
    edges = (await c.get("/v1/graph/edges", params={"limit": 200}, headers=full)).text.lower()
    assert WORD in edges and "iceland" in edges
    # a fact with one supporting memory within the ceiling stays visible to the low key
    low = (await c.get("/v1/graph/edges", params={"limit": 200}, headers=tiered.h("low"))).text.lower()
    assert "iceland" in low and WORD not in low


async def test_a_low_ceiling_key_finds_the_secret_memory_on_no_read_route(tiered: Tiered) -> None:
    c, low = tiered.client, tiered.h("low")
    schema = c._transport.app.openapi()  # type: ignore[attr-defined]
    secret_id = tiered.ids["secret_memory"]
    walked: list[str] = []
    answered: list[str] = []  # with 200
    for path, ops in schema["paths"].items():
        if path in PUBLIC_PATHS or path.startswith("/mcp"):
            continue
        for method in (m.upper() for m in ops):
            if method != "GET" and not (method == "POST" and (path in READ_POSTS or path in READ_BODIES)):
                continue  # writes: the walk is of reads
            url = _fill(path, tiered.ids)
            params: dict[str, Any] = {"limit": 200, "name": "Priya Zorblax", "query": "Zorblax",
                                      "include_history": "true"}
            resp = await c.request(method, url, params=params if method == "GET" else None,
                                   json=READ_BODIES.get(path), headers=low)
            assert resp.status_code < 500, (method, path, resp.text)
            walked.append(f"{method} {path}")
            if resp.status_code >= 400:  # an error repeats what it was asked (the name, the id), nothing more
                assert resp.status_code in (404, 422), (method, path, resp.text)
                continue
            text = resp.text.lower()
            at = max(text.find(WORD), text.find(secret_id))
            assert at < 0, (method, path, resp.text[max(0, at - 700):at + 200])
            answered.append(f"{method} {path}")
    assert len(walked) >= 30 and len(answered) >= 20, sorted(set(walked) - set(answered))
    # the secret write's task answers (without it); its trace and its entity are unknown to this key
    assert {"GET /v1/memories/status/{task_id}", "POST /v1/search", "GET /v1/export", "GET /v1/graph/edges",
            "POST /v1/graph/query", "GET /v1/traces"} <= set(answered), answered
    assert "GET /v1/traces/{trace_id}" in set(walked) - set(answered)
    # the same key sees what is within its ceiling
    found = await c.post("/v1/search", json={"query": "green tea Reykjavik office"}, headers=low)
    assert tiered.ids["public_memory"] in found.text and tiered.ids["internal_memory"] in found.text


async def test_a_read_lowers_its_own_ceiling_and_never_raises_the_keys(tiered: Tiered) -> None:
    c = tiered.client
    public_id, internal_id = tiered.ids["public_memory"], tiered.ids["internal_memory"]
    # the full key, lowered by a parameter (GET) or a body field (POST)
    listed = await c.get("/v1/memories", params={"max_sensitivity": "public", "limit": 200}, headers=tiered.h("full"))
    assert [m["id"] for m in listed.json()["memories"]] == [public_id]
    found = await c.post("/v1/search", json={"query": "Zorblax Reykjavik office tea", "max_sensitivity": "internal"},
                         headers=tiered.h("full"))
    assert found.status_code == 200 and WORD not in found.text.lower() and internal_id in found.text
    # a public key asking for more gets no more
    for ask in ({"max_sensitivity": "secret"}, {}):
        listed = await c.get("/v1/memories", params={**ask, "limit": 200}, headers=tiered.h("public"))
        assert [m["id"] for m in listed.json()["memories"]] == [public_id]
    found = await c.post("/v1/search", json={"query": "Reykjavik office", "max_sensitivity": "secret"},
                         headers=tiered.h("public"))
    assert public_id in found.text and internal_id not in found.text and WORD not in found.text.lower()
    # a task's result shows no memory above the ceiling
    task = await c.get(f"/v1/memories/status/{tiered.ids['secret_task']}", headers=tiered.h("public"))
    assert task.status_code == 200 and task.json()["result"]["memories"] == []
    # an unknown tier is a schema error
    bad = await c.get("/v1/memories", params={"max_sensitivity": "top"}, headers=tiered.h("full"))
    assert bad.status_code == 422 and "max_sensitivity" in bad.text


async def test_personal_facts_are_private_by_default(tiered: Tiered) -> None:
    c, full = tiered.client, tiered.h("full")
    resp = await c.post("/v1/memories/raw", json={"content": "My blood type is AB negative.",
                                                  "category": "personal_fact"}, headers=full)
    done = await _wait(c, resp.json()["task_id"], full)
    assert done["result"]["memories"][0]["sensitivity"] == "private"
    memory_id = done["result"]["memories"][0]["id"]
    assert (await c.get(f"/v1/memories/{memory_id}", headers=tiered.h("low"))).status_code == 404
    assert (await c.get(f"/v1/memories/{memory_id}", headers=full)).status_code == 200


async def test_the_mcp_tools_under_a_low_ceiling_key_find_it_nowhere(tmp_path: Path) -> None:
    """The streamable HTTP transport on the API (its own app: the transport's task group lives in the test's task)."""
    async with running_app(tmp_path, auth_mode="keys", mcp_transport="http", mcp_toolsets="all") as (c, deps):
        store = ApiKeyStore(deps.redis, deps.settings.redis)
        user = unique("um")
        keys = {"full": (await store.create(user, "every tier"))[1],
                "low": (await store.create(user, "internal", max_sensitivity="internal"))[1]}
        full = {"Authorization": f"Bearer {keys['full']}"}
        written = []
        for path, body in (("/v1/memories/raw", {"content": SECRET, "category": "personal_fact",
                                                 "sensitivity": "secret"}),
                           ("/v1/graph/facts", {"subject": "Priya Zorblax", "predicate": "works_at",
                                                "object": "Quuxcorp Clinic", "sensitivity": "secret"})):
            resp = await c.post(path, json=body, headers=full)
            done = await _wait(c, resp.json()["task_id"], full)
            assert done["status"] == "completed", done
            written.append((resp.json()["task_id"], done["result"]["memories"][0]["id"]))
        hdrs = {"Accept": "application/json, text/event-stream", "Host": "127.0.0.1:8000"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "0"}}}
        calls = {"recall_memories": {"query": "Zorblax locker code"}, "list_memories": {},
                 "search_knowledge_graph": {"query": "Zorblax Quuxcorp"},
                 "get_facts_about": {"name": "Quuxcorp Clinic"}, "query_graph": {"predicate": "works_at"},
                 "get_task_status": {"task_id": written[0][0]}}
        for who, sees in (("full", True), ("low", False)):
            auth = {**hdrs, "Authorization": f"Bearer {keys[who]}"}
            started = await c.post("/mcp/", json=init, headers=auth)
            assert started.status_code == 200, started.text
            texts = []
            for n, (tool, arguments) in enumerate(calls.items()):
                call = {"jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
                        "params": {"name": tool, "arguments": {**arguments, "user_id": user}}}
                answer = await c.post("/mcp/", json=call, headers=auth)
                assert answer.status_code == 200, answer.text
                text = answer.text.lower()
                assert not answer.json()["result"]["isError"] or tool == "get_facts_about", (tool, text[:1500])
                if not sees:
                    assert WORD not in text and written[0][1] not in text, (tool, text[:1500])
                texts.append(text)
            assert sum(WORD in t for t in texts) >= (4 if sees else 0), texts  # the full key's answers hold it


async def test_keys_create_takes_a_ceiling(tiered: Tiered, capsys: pytest.CaptureFixture[str]) -> None:
    from service.__main__ import keys_command, parse_args

    args = parse_args(["keys", "create", "--user", tiered.user, "--max-sensitivity", "public"])
    assert await keys_command(tiered.deps.settings, args) == 0
    out = capsys.readouterr().out
    assert "reading up to public" in out
    key = out.strip().splitlines()[-1]
    listed = await tiered.client.get("/v1/memories", params={"limit": 200},
                                     headers={"Authorization": f"Bearer {key}"})
    assert [m["id"] for m in listed.json()["memories"]] == [tiered.ids["public_memory"]]
    with pytest.raises(SystemExit):  # an unknown tier is refused by the command line
        parse_args(["keys", "create", "--user", tiered.user, "--max-sensitivity", "top"])
