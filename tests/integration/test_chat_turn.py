"""One payload for a chat turn against the real stack: `POST /v1/search` with
`include: ["messages", "entities", "traces"]` returns the memories and, beside them, message hits from the
conversation tier (the current session's first), the entities the query names with their score and related
names, and prior task runs."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.conftest import unique
from tests.integration.conftest import wait_task, write_raw


async def _accepted(client: httpx.AsyncClient, path: str, **body: Any) -> dict[str, Any]:
    resp = await client.post(path, json=body)
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    return done


async def test_search_with_messages_entities_and_traces(client: httpx.AsyncClient) -> None:
    user = unique("turn")
    await _accepted(client, "/v1/memories", user_id=user, session_id="monday", project_id="shop", messages=[
        {"role": "user", "content": "The orders service of the shop stores its data in Postgres."},
        {"role": "assistant", "content": "Noted: orders live in Postgres."}])
    await _accepted(client, "/v1/memories", user_id=user, session_id="tuesday", project_id="shop", messages=[
        {"role": "user", "content": "Postgres was slow this morning, can you look at the indexes?"}])
    await _accepted(client, "/v1/memories", user_id=unique("other"), session_id="tuesday", messages=[
        {"role": "user", "content": "My Postgres is fine."}])
    await write_raw(client, user_id=user, content="The orders service uses Postgres and Redis",
                    category="architecture", project_id="shop")
    await _accepted(client, "/v1/runs", user_id=user, project_id="shop", session_id="monday",
                    task="Migrate the orders table", steps=[{"seq": 0, "action": "run the migration", "tool_calls": [
                        {"tool": "Bash", "arguments": {"command": "alembic upgrade head"}, "status": "error",
                         "error": "connection to Postgres refused", "touched": [{"name": "Postgres",
                                                                                "type": "service"}]}]}])

    body = {"user_id": user, "query": "Postgres", "project_id": "shop", "session_id": "tuesday",
            "include": ["messages", "entities", "traces"]}
    resp = await client.post("/v1/search", json=body)
    assert resp.status_code == 200, resp.text
    turn = resp.json()
    assert any("Postgres" in r["content"] for r in turn["results"])  # the memories, as without include

    sessions = [m["session_id"] for m in turn["messages"]]
    assert sessions[0] == "tuesday" and set(sessions) == {"tuesday", "monday"}  # current session first
    assert turn["messages"][0]["content"] == "Postgres was slow this morning, can you look at the indexes?"
    assert "My Postgres is fine." not in json.dumps(turn)  # another user's messages

    [postgres] = turn["entities"]  # "Postgres" names one entity: PostgreSQL, through the identity gate
    assert (postgres["name"], postgres["aliases"], postgres["score"]) == ("PostgreSQL", ["Postgres"], 1.0)
    assert postgres["group_id"] == "project--shop" and postgres["mentions"] >= 3  # two messages' facts, one raw
    assert postgres["related"] and all(isinstance(n, str) for n in postgres["related"])

    [run] = turn["reasoning"]  # its tool call named Postgres and touched the entity a returned memory mentions
    assert run["task"] == "Migrate the orders table" and sorted(run["via"]) == ["entities", "query"]
    assert run["entities"] == ["PostgreSQL"]

    plain = (await client.post("/v1/search", json={k: v for k, v in body.items() if k != "include"})).json()
    assert plain["messages"] is None and plain["entities"] is None and plain["reasoning"] is None
    only = (await client.post("/v1/search", json={**body, "include": ["entities"]})).json()
    assert only["messages"] is None and only["reasoning"] is None and only["entities"] == turn["entities"]
