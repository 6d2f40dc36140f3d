"""Preferences with a scope and a history against the real stack (API + ARQ worker, Redis,
Neo4j, Qdrant Edge, the offline extractor): a newer preference of the same kind and scope supersedes the older
one, both kept; listings, search and the context show the active one unless asked for history."""

from __future__ import annotations

from typing import Any

import httpx

from service.deps import Deps
from service.tasks.jobs import ConversationJob
from tests.conftest import unique
from tests.integration.conftest import wait_task, write_raw
from worker.handlers import job_handlers


async def _listing(client: httpx.AsyncClient, user: str, **params: Any) -> dict[str, dict[str, Any]]:
    resp = await client.get("/v1/memories", params={"user_id": user, "limit": 200, **params})
    assert resp.status_code == 200, resp.text
    return {m["id"]: m for m in resp.json()["memories"]}


async def _talk(client: httpx.AsyncClient, user: str, *turns: tuple[str, str]) -> dict[str, Any]:
    resp = await client.post("/v1/memories", json={
        "user_id": user, "messages": [{"role": role, "content": text} for role, text in turns]})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    return done


async def test_a_newer_preference_supersedes_the_older_one_of_its_kind_and_scope(client: httpx.AsyncClient) -> None:
    user = unique("pref")
    old = await write_raw(client, user_id=user, category="preference", kind="budget", applies_to=["team dinner"],
                          content="Keep the team dinner budget at 50 dollars.")
    other = await write_raw(client, user_id=user, category="preference", kind="budget", applies_to=["offsite"],
                            content="Keep the offsite budget at 900 dollars.")
    new = await write_raw(client, user_id=user, category="preference", kind="Budget", applies_to=["Team Dinner"],
                          content="Keep the team dinner budget at 80 dollars.")
    [old_id], [other_id], [new_id] = ([m["id"] for m in w["result"]["memories"]] for w in (old, other, new))

    active = await _listing(client, user)
    assert set(active) == {other_id, new_id}  # another applies_to is another scope: not superseded
    assert active[new_id]["kind"] == "budget" and active[new_id]["applies_to"] == ["Team Dinner"]
    assert active[new_id]["superseded_by"] is None

    history = await _listing(client, user, include_superseded="true")
    assert set(history) == {old_id, other_id, new_id}  # both kept
    assert history[old_id]["superseded_by"] == new_id and history[old_id]["superseded_at"]
    assert history[old_id]["content"] == "Keep the team dinner budget at 50 dollars."

    resp = await client.post("/v1/search", json={"user_id": user, "query": "team dinner budget dollars",
                                                 "limit": 10})
    assert resp.status_code == 200, resp.text
    found = [r["id"] for r in resp.json()["results"]]
    assert new_id in found and old_id not in found

    resp = await client.get("/v1/context/global", params={"user_id": user})
    assert resp.status_code == 200, resp.text
    in_context = {m["id"] for g in resp.json()["categories"] for m in g["memories"]}
    assert in_context == {other_id, new_id}

    # what a preference applies to is an entity of the graph (through the identity gate; its type when known)
    await write_raw(client, user_id=user, category="preference", kind="naming", applies_to=["Postgres"],
                    content="Use snake_case for table names.")
    resp = await client.get("/v1/graph/nodes", params={"user_id": user})
    assert resp.status_code == 200, resp.text
    nodes = {n["name"].casefold(): n for n in resp.json()["items"]}
    assert {"team dinner", "offsite", "postgresql"} <= set(nodes), nodes
    assert nodes["postgresql"]["type"] == "database"

    # in one batch, the later item of a slot wins
    resp = await client.post("/v1/memories/raw/batch", json={"user_id": user, "memories": [
        {"category": "preference", "kind": "editor", "content": "Use vim for quick edits."},
        {"category": "preference", "kind": "editor", "content": "Use helix for quick edits."}]})
    assert resp.status_code == 202, resp.text
    batch = await wait_task(client, resp.json()["task_id"])
    [vim_id, helix_id] = [m["id"] for m in batch["result"]["memories"]]
    history = await _listing(client, user, include_superseded="true")
    assert history[vim_id]["superseded_by"] == helix_id and history[helix_id]["superseded_by"] is None
    assert vim_id not in await _listing(client, user)

    # kind and applies_to belong to preferences only
    resp = await client.post("/v1/memories/raw", json={"user_id": user, "category": "tech_stack", "kind": "budget",
                                                      "content": "We use PostgreSQL."})
    assert resp.status_code == 400, resp.text


async def test_an_explicit_correction_supersedes_offline_across_writes(client: httpx.AsyncClient, deps: Deps
                                                                      ) -> None:
    user = unique("pref")
    await _talk(client, user, ("user", "I prefer to keep the dinner budget at 50 dollars."))
    [before] = [m for m in (await _listing(client, user, category="preference")).values()]
    assert before["kind"] is None  # never guessed: a correction supersedes the very preference it revises

    done = await _talk(client, user, ("user", "Actually, make that 80 dollars."))
    [now] = (await _listing(client, user, category="preference")).values()
    assert now["content"] == "I prefer to keep the dinner budget at 80 dollars."
    assert now["kind"] is None and now["id"] != before["id"]

    history = await _listing(client, user, category="preference", include_superseded="true")
    assert set(history) == {before["id"], now["id"]}
    assert history[before["id"]]["superseded_by"] == now["id"]

    # a replay of the job (a crash after the marking) corrects the same preference and writes the same memories
    job = ConversationJob(accepted_at=now["created_at"], user_id=user, messages=[
        {"role": "user", "content": "Actually, make that 80 dollars."}])
    replay = await job_handlers(deps).writes.conversation(str(done["task_id"]), job)
    assert replay["memories"] == done["result"]["memories"]
    assert await _listing(client, user, category="preference", include_superseded="true") == history


async def test_a_correction_in_the_same_conversation_leaves_one_active_preference(client: httpx.AsyncClient) -> None:
    user = unique("pref")
    hotel = await _talk(client, user, ("user", "I prefer hotels under 150 euros a night."))
    [hotel_id] = [m["id"] for m in hotel["result"]["memories"] if m["category"] == "preference"]
    done = await _talk(client, user, ("user", "I prefer to keep the dinner budget at 50 dollars."),
                       ("assistant", "Noted, 50 dollars for the dinner."),
                       ("user", "Actually, make that 80 dollars instead."))
    prefs = [m for m in done["result"]["memories"] if m["category"] == "preference"]
    assert [m["content"] for m in prefs] == ["I prefer to keep the dinner budget at 50 dollars.",
                                             "I prefer to keep the dinner budget at 80 dollars."]
    active = await _listing(client, user, category="preference")
    # another amount of money is another preference: only the one corrected is superseded
    assert sorted(m["content"] for m in active.values()) == ["I prefer hotels under 150 euros a night.",
                                                             "I prefer to keep the dinner budget at 80 dollars."]
    assert hotel_id in active
    history = await _listing(client, user, category="preference", include_superseded="true")
    assert history[prefs[0]["id"]]["superseded_by"] == prefs[1]["id"]
