"""Drop-in compatibility with the seed's clients, and the server side of the agent hooks: repeated
observations fold into one memory, old observations expire."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx

from service.core.domain import Memory, Scope, content_hash
from service.deps import Deps
from service.stores.vector import MemoryFilter
from tests.conftest import unique
from tests.integration.conftest import write_raw


async def test_unknown_category_uses_the_seeds_wording(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/memories/raw", json={"content": "x", "user_id": "u", "category": "hobby"})
    assert resp.status_code == 400
    detail = resp.json()["detail"]
    assert detail.startswith("Invalid category") and "preference" in detail and "task_context" in detail


async def test_legacy_root_endpoints_answer_like_the_seed(client: httpx.AsyncClient) -> None:
    user = unique("legacy")
    resp = await client.post("/memories/async", json={
        "messages": [{"role": "user", "content": "I use Python 3.12 with FastAPI."}], "user_id": user})
    assert resp.status_code == 200
    body = resp.json()
    assert body["status"] == "accepted" and body["poll_url"] == f"/memories/status/{body['task_id']}"
    for _ in range(400):
        status = (await client.get(body["poll_url"])).json()
        if status["status"] in ("completed", "failed"):
            break
        await asyncio.sleep(0.05)
    assert status["status"] == "completed" and status["result"]["memories"]
    assert (await client.get(f"/v1/memories/status/{body['task_id']}")).json()["status"] == "completed"
    schema = (await client.get("/openapi.json")).json()
    assert schema["paths"]["/memories/async"]["post"]["deprecated"] is True
    assert schema["paths"]["/memories/status/{task_id}"]["get"]["deprecated"] is True


async def test_repeated_observations_fold_into_one_memory_with_a_count(client: httpx.AsyncClient, deps: Deps) -> None:
    user, session = unique("fold"), unique("s")
    meta = {"session_id": session, "tool": "Edit", "fold_key": "edit:service/api/search.py"}
    body = {"user_id": user, "category": "task_context", "project_id": "p1", "agent_id": "claude-code"}
    first = await write_raw(client, content="Edited service/api/search.py", metadata=meta, **body)
    for i in range(2):
        await write_raw(client, content=f"Edited service/api/search.py: change {i}", metadata=meta, **body)
    other = await write_raw(client, content="Ran pytest -q: ok", **body,
                            metadata={**meta, "tool": "Bash", "fold_key": "bash:pytest"})
    page, _ = await deps.vectors.scroll(MemoryFilter(user_id=user, all_scopes=True), 50)
    by_id = {m.id: m for m in page}
    assert len(page) == 2
    folded = by_id[first["result"]["memories"][0]["id"]]
    assert folded.content == "Edited service/api/search.py: change 1 (x3)" and folded.metadata["count"] == 3
    assert other["result"]["memories"][0]["id"] in by_id
    # a repeat after another action is a new observation
    again = await write_raw(client, content="Edited service/api/search.py: change 2", metadata=meta, **body)
    assert again["result"].get("folded") is None
    assert await deps.vectors.count(MemoryFilter(user_id=user, all_scopes=True)) == 3


async def test_old_observations_expire_and_other_memories_stay(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("ttl")
    old = "2020-01-01T00:00:00+00:00"

    def memory(content: str, metadata: dict[str, str]) -> Memory:
        return Memory(id=str(uuid.uuid4()), user_id=user, content=content, category="task_context",
                      scope=Scope.GLOBAL, hash=content_hash(content), metadata=metadata, created_at=old,
                      updated_at=old)

    observation = memory("Edited a.py", {"session_id": "s1", "tool": "Edit"})
    note = memory("Working on the parser", {})
    vectors = await deps.embedder.embed([observation.content, note.content])
    await deps.vectors.upsert([observation, note], vectors)
    fresh = await write_raw(client, content="Edited b.py", user_id=user, category="task_context",
                            metadata={"session_id": "s2", "tool": "Edit"})
    assert await deps.maintenance.expire_observations() >= 1
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and await deps.vectors.get([observation.id]):
        await asyncio.sleep(0.1)
    left = {m.id for m in await deps.vectors.get([observation.id, note.id, fresh["result"]["memories"][0]["id"]])}
    assert observation.id not in left
    assert note.id in left and fresh["result"]["memories"][0]["id"] in left
