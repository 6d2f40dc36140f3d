"""Export -> delete everything -> import gives back the same memories, facts (history too) and search results;
a bad line is reported and the rest imported; a second import changes nothing; gzip uploads work; a file
without vectors (or from another embedder) is re-embedded; a user key cannot import another user's file."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx

from service.deps import Deps
from tests.conftest import unique
from tests.integration.conftest import wait_task, write_raw


async def export(client: httpx.AsyncClient, user: str, **params: Any) -> list[dict[str, Any]]:
    resp = await client.get("/v1/export", params={"user_id": user, **params})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in resp.text.splitlines()]


async def import_body(client: httpx.AsyncClient, body: bytes) -> dict[str, Any]:
    resp = await client.post("/v1/import", content=body, headers={"content-type": "application/x-ndjson"})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"], timeout=60)
    assert done["status"] == "completed", done
    assert done["progress"]["done"] == done["progress"]["total"] > 0
    return dict(done["result"])


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


async def snapshot(client: httpx.AsyncClient, deps: Deps, user: str) -> tuple[Any, Any, Any]:
    listed = (await client.get("/v1/memories", params={"user_id": user, "limit": 100})).json()["memories"]
    facts = sorted(await deps.graph.relations(user), key=lambda r: str(r["id"]))
    found = (await client.post("/v1/search", json={"user_id": user, "query": "where do I work", "limit": 5})).json()
    # the same results, found by the same retrievers (equal scores may come back in either order)
    return (sorted(listed, key=lambda m: m["id"]), facts,
            sorted((r["id"], sorted(s["retriever"] for s in r["signals"])) for r in found["results"]))


async def test_export_delete_import_round_trip(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("port")
    await write_raw(client, user_id=user, category="personal_fact", content="I work at Acme.",
                    occurred_at="2023-01-05T10:00:00Z")
    await write_raw(client, user_id=user, category="personal_fact", content="I live in Oslo")
    await write_raw(client, user_id=user, category="personal_fact", content="I work at Globex.",
                    occurred_at="2024-03-01T10:00:00Z")  # works_at Acme becomes history
    await write_raw(client, user_id=user, category="tech_stack", content="The billing service uses Kafka",
                    project_id="billing")
    before = await snapshot(client, deps, user)
    assert any(f["invalid_at"] for f in before[1]), "the superseded fact is part of the history"

    lines = await export(client, user, include_vectors="true")
    header, end = lines[0], lines[-1]
    assert header["type"] == "header" and header["user_id"] == user and header["embedder"] == deps.embedder.name
    assert header["totals"]["memories"] == 4
    kinds = [x["type"] for x in lines]
    assert kinds.index("entity") < kinds.index("memory") < kinds.index("fact") and end["type"] == "end"
    assert end["counts"] == {"entities": kinds.count("entity"), "memories": 4, "facts": kinds.count("fact")}
    assert all(len(x["vector"]) == deps.embedder.dim for x in lines if x["type"] == "memory")
    assert {x["fact"]["id"] for x in lines if x["type"] == "fact"} == {f["id"] for f in before[1]}

    wiped = await client.post("/v1/memories/delete", json={"user_id": user, "all": True})
    done = await wait_task(client, wiped.json()["task_id"])
    assert len(done["result"]["deleted"]) == 4
    assert (await client.get("/v1/memories", params={"user_id": user})).json()["memories"] == []

    result = await import_body(client, gzip.compress(ndjson(lines)))  # gzip is detected
    assert result["imported"]["memories"] == 4 and result["rejected"] == []
    assert result["imported"]["reembedded"] == 0 and result["vectors"] == "reused"
    after = await snapshot(client, deps, user)
    assert after == before

    again = await import_body(client, ndjson(lines))  # the same file twice: nothing changes
    assert again["imported"]["memories"] == 4
    assert await snapshot(client, deps, user) == before


async def test_bad_lines_are_reported_and_the_rest_imported(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("port")
    await write_raw(client, user_id=user, category="preference", content="I prefer dark mode in every editor")
    lines = await export(client, user)  # no vectors: the import embeds
    assert all("vector" not in x for x in lines)
    body = ndjson(lines[:2]).decode() + "this is not json\n" + json.dumps(
        {"type": "memory", "memory": {"id": "x"}}) + "\n" + ndjson(lines[2:]).decode()
    await client.post("/v1/memories/delete", json={"user_id": user, "all": True})
    result = await import_body(client, body.encode())
    assert result["imported"]["memories"] == 1 and result["imported"]["reembedded"] == 1
    assert [r["line"] for r in result["rejected"]] == [3, 4]
    assert "not JSON" in result["rejected"][0]["reason"] and "ValidationError" in result["rejected"][1]["reason"]
    found = (await client.post("/v1/search", json={"user_id": user, "query": "dark mode"})).json()["results"]
    assert [r["content"] for r in found] == ["I prefer dark mode in every editor"]


async def test_unusable_uploads_are_refused(client: httpx.AsyncClient) -> None:
    empty = await client.post("/v1/import", content=b"")
    assert empty.status_code == 400 and "empty" in empty.json()["detail"]
    not_export = await client.post("/v1/import", content=b'{"type": "memory"}\n')
    assert not_export.status_code == 400 and "header" in not_export.json()["detail"]
    bad_gzip = await client.post("/v1/import", content=b"\x1f\x8bnot really")
    assert bad_gzip.status_code == 400 and "gzip" in bad_gzip.json()["detail"]
