"""Conversations against the real stack: messages kept in order under a session, listed,
paged, summarised offline; deletes erase them."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from scripts.bench.procs import SlowProxy
from service.conversations.writes import drain_pending_erasures, erase_after_delete, expire_tiers
from service.deps import Deps
from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task


async def _write(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/memories", json=body)
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    return done


FIRST = [
    {"id": "m1", "role": "user", "content": "We are planning the trip to Lisbon in May.",
     "timestamp": "2026-05-01T10:00:00Z"},
    {"id": "m2", "role": "assistant", "content": "Lisbon in May is warm. Do you want hotel ideas?",
     "timestamp": "2026-05-01T10:00:05Z"},
    {"id": "m3", "role": "user", "content": "Yes, a hotel near the river in Lisbon, under 150 euros a night.",
     "timestamp": "2026-05-01T10:01:00Z"},
]
SECOND = [
    {"id": "m4", "role": "assistant", "content": "The hotel near the river in Lisbon costs 140 euros a night."},
    {"id": "m5", "role": "user", "content": "Book the Lisbon hotel for the trip."},
]


async def test_a_session_reads_back_in_order_lists_pages_and_summarises(client: httpx.AsyncClient) -> None:
    user, session = unique("conv"), unique("s")
    first = await _write(client, user_id=user, session_id=session, messages=FIRST, project_id="travel")
    assert first["result"]["session_id"] == session
    await _write(client, user_id=user, session_id=session, messages=SECOND)
    # a write without a session is its own session, named by its task id
    alone = await _write(client, user_id=user, messages=[{"role": "user", "content": "I like green tea."}])
    assert alone["result"]["session_id"] == alone["task_id"]

    resp = await client.get(f"/v1/conversations/{session}", params={"user_id": user})
    assert resp.status_code == 200, resp.text
    items = resp.json()["items"]
    assert [m["id"] for m in items] == ["m1", "m2", "m3", "m4", "m5"]
    assert [m["role"] for m in items] == ["user", "assistant", "user", "assistant", "user"]
    assert items[0]["timestamp"] == "2026-05-01T10:00:00Z" and items[0]["content"] == FIRST[0]["content"]
    assert all(m["memory_ids"] for m in items)  # each message is in a memory (an interaction window at least)

    paged: list[str] = []
    cursor = None
    for _ in range(5):
        params: dict[str, Any] = {"user_id": user, "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(f"/v1/conversations/{session}", params=params)).json()
        paged += [m["id"] for m in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert paged == ["m1", "m2", "m3", "m4", "m5"]

    sessions = (await client.get("/v1/conversations", params={"user_id": user})).json()["items"]
    by_id = {s["session_id"]: s for s in sessions}
    assert set(by_id) == {session, alone["task_id"]}
    assert by_id[session]["message_count"] == 5 and by_id[session]["project_id"] == "travel"
    assert by_id[session]["created_at"] <= by_id[session]["updated_at"]
    assert sessions[0]["session_id"] == alone["task_id"]  # most recently written first
    only_travel = (await client.get("/v1/conversations", params={"user_id": user, "project_id": "travel"})).json()
    assert [s["session_id"] for s in only_travel["items"]] == [session]

    summary = (await client.get(f"/v1/conversations/{session}/summary", params={"user_id": user,
                                                                                  "sentences": 2})).json()
    assert summary["method"] == "extractive" and summary["message_count"] == 5
    assert len(summary["sentences"]) == 2 and "Lisbon" in summary["summary"]
    ids = [s["message_id"] for s in summary["sentences"]]
    assert ids == sorted(ids)  # in conversation order

    # message search: full text, the current session first
    other = await _write(client, user_id=user, session_id="other", messages=[
        {"role": "user", "content": "The hotel in Porto was too loud."}])
    hits = (await client.post("/v1/conversations/search", json={"user_id": user, "query": "hotel",
                                                                "session_id": "other"})).json()["results"]
    assert hits[0]["session_id"] == "other" and hits[0]["task_id"] == other["task_id"]
    assert {h["id"] for h in hits if h["session_id"] == session} == {"m2", "m3", "m4", "m5"}
    assert (await client.post("/v1/conversations/search", json={"user_id": unique("x"),
                                                                "query": "Porto"})).json()["results"] == []

    assert (await client.get("/v1/conversations/nope", params={"user_id": user})).status_code == 404
    assert (await client.get(f"/v1/conversations/{session}", params={"user_id": unique("x")})).status_code == 404


async def test_deletes_erase_messages(client: httpx.AsyncClient) -> None:
    user, session = unique("conv"), unique("s")
    done = await _write(client, user_id=user, session_id=session, messages=FIRST)
    # deleting a memory erases the messages it came from
    window = next(m for m in done["result"]["memories"] if "m2" in m["source_message_ids"])
    resp = await client.delete(f"/v1/memories/{window['id']}", params={"user_id": user})
    assert (await wait_task(client, resp.json()["task_id"]))["status"] == "completed"
    left = (await client.get(f"/v1/conversations/{session}", params={"user_id": user})).json()["items"]
    assert "m2" not in [m["id"] for m in left] and all(window["id"] not in m["memory_ids"] for m in left)
    # a session's delete erases the rest
    resp = await client.delete(f"/v1/conversations/{session}", params={"user_id": user})
    assert resp.status_code == 202
    assert (await wait_task(client, resp.json()["task_id"]))["status"] == "completed"
    assert (await client.get(f"/v1/conversations/{session}", params={"user_id": user})).status_code == 404
    assert (await client.get("/v1/conversations", params={"user_id": user})).json()["items"] == []

    # a delete of everything of the user erases its sessions and runs too
    await _write(client, user_id=user, session_id="s2", messages=SECOND)
    run = await client.post("/v1/runs", json={"user_id": user, "task": "tidy up"})
    assert (await wait_task(client, run.json()["task_id"]))["status"] == "completed"
    resp = await client.post("/v1/memories/delete", json={"user_id": user, "all": True})
    assert (await wait_task(client, resp.json()["task_id"]))["status"] == "completed"
    assert (await client.get("/v1/conversations", params={"user_id": user})).json()["items"] == []
    assert (await client.get("/v1/runs", params={"user_id": user})).json()["items"] == []


async def test_retention_erases_old_messages_and_runs(client: httpx.AsyncClient, deps: Deps) -> None:
    user, session = unique("conv"), unique("s")
    await _write(client, user_id=user, session_id=session, messages=FIRST)
    run = await client.post("/v1/runs", json={"user_id": user, "task": "old work"})
    assert (await wait_task(client, run.json()["task_id"]))["status"] == "completed"
    # a one-day retention keeps what was just written
    one_day = deps.settings.retention.model_copy(update={"message_retention_days": 1, "run_retention_days": 1})
    kept = await expire_tiers(one_day, deps.graph, user)
    assert kept == {"messages": 0, "runs": 0}
    assert len((await client.get(f"/v1/conversations/{session}", params={"user_id": user})).json()["items"]) == 3
    # what was written before the cut-off goes (a cut-off in the future, for this user only)
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert await deps.graph.conversations.expire_messages(later, user) == 3
    assert await deps.graph.runs.expire_runs(later, user) == 1
    assert (await client.get(f"/v1/conversations/{session}", params={"user_id": user})).status_code == 404
    assert (await client.get(f"/v1/runs/{run.json()['run_id']}", params={"user_id": user})).status_code == 404


async def test_messages_of_a_write_while_the_graph_is_slow_are_kept_later(tmp_path: Path) -> None:
    upstream = int(os.environ["TEST_NEO4J_URI"].rsplit(":", 1)[1])
    async with SlowProxy(upstream) as proxy, running_app(
        tmp_path, neo4j_uri=f"bolt://127.0.0.1:{proxy.port}", graph_timeout_seconds=1
    ) as (client, _):
        user, session = unique("conv"), unique("s")
        proxy.delay = 8.0
        resp = await client.post("/v1/memories", json={"user_id": user, "session_id": session, "messages": SECOND})
        done = await wait_task(client, resp.json()["task_id"], timeout=90)
        assert done["status"] == "completed" and done["result"]["graph"] == "pending", done
        proxy.delay = 0.0
        items: list[str] = []
        for _ in range(600):  # the reconcile tick stores the messages once the graph answers again
            page = await client.get(f"/v1/conversations/{session}", params={"user_id": user})
            items = [m["id"] for m in page.json()["items"]] if page.status_code == 200 else []
            if items:
                break
            await asyncio.sleep(0.1)
        assert items == ["m4", "m5"]


async def test_a_delete_whose_graph_half_is_pending_erases_the_messages_later(
        client: httpx.AsyncClient, deps: Deps) -> None:
    user, session = unique("conv"), unique("s")
    done = await _write(client, user_id=user, session_id=session, messages=FIRST)
    window = next(m for m in done["result"]["memories"] if "m1" in m["source_message_ids"])
    # what apply_delete does when the ledger reports the graph half pending (graph down or slow)
    await erase_after_delete(deps.settings.redis, deps.tasks, deps.graph, user, [window["id"]], False,
                             datetime.now(UTC).isoformat(), graph_done=False)
    await drain_pending_erasures(deps.settings.redis, deps.tasks, deps.graph)  # (the reconcile tick may be first)
    left = (await client.get(f"/v1/conversations/{session}", params={"user_id": user})).json()["items"]
    assert "m1" not in [m["id"] for m in left] and len(left) < 3
