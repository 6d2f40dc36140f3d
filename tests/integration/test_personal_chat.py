"""A short personal chat through POST /v1/memories with the offline extractor: the graph's facts are about
the right subject (a third party, a named project, a role on it), a plan keeps the day it is for beside when it was
said, and the context keeps the user's words where a fact would only be a fragment of them."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import unique
from tests.integration.conftest import wait_task

MONDAY = "2026-11-30T09:15:00+00:00"  # Monday 30 November 2026
CHAT = [
    "Hi! I take my coffee black, no sugar. I really prefer it that way.",
    "My sister Maya lives in Lisbon.",
    "Orion is a web app built with Django, PostgreSQL and React.",
    "My colleague Tom Becker is the tech lead on Orion.",
    "Tom and I are meeting on Friday to go over the Orion roadmap.",
    "I ran my first half marathon last Saturday!",
]


def triples(page: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(f["subject"]["name"], f["predicate"], f["object"]["name"]) for f in page["items"]}


async def graph_facts(client: httpx.AsyncClient, user: str, name: str) -> set[tuple[str, str, str]]:
    resp = await client.get("/v1/graph/facts", params={"user_id": user, "name": name})
    assert resp.status_code == 200, resp.text
    return triples(resp.json())


async def test_a_personal_chat_gives_the_right_subjects_dates_and_words(client: httpx.AsyncClient) -> None:
    user = unique("chat52")
    messages: list[dict[str, str]] = []
    for text in CHAT:
        messages += [{"role": "user", "content": text, "timestamp": MONDAY},
                     {"role": "assistant", "content": "Got it.", "timestamp": MONDAY}]
    resp = await client.post("/v1/memories", json={"user_id": user, "messages": messages})
    assert resp.status_code == 202, resp.text
    task = await wait_task(client, resp.json()["task_id"], timeout=60)
    assert task["status"] == "completed", task

    maya = await graph_facts(client, user, "Maya")
    assert {("Maya", "lives_in", "Lisbon"), ("Maya", "sister_of", "user")} <= maya
    assert not any(s == "user" and p == "lives_in" for s, p, _ in await graph_facts(client, user, "Lisbon"))
    orion = await graph_facts(client, user, "Orion")
    assert {("Orion", "uses", "Django"), ("Orion", "uses", "PostgreSQL"), ("Orion", "uses", "React"),
            ("Tom Becker", "tech_lead_of", "Orion")} <= orion
    assert not any(s == "project" for s, _, _ in orion)
    assert ("Tom Becker", "colleague_of", "user") in await graph_facts(client, user, "Tom Becker")

    listed = await client.get("/v1/memories", params={"user_id": user, "limit": 100})
    assert listed.status_code == 200, listed.text
    items = listed.json()["memories"]
    [plan] = [m for m in items if m["category"] != "interaction" and "meeting on Friday" in m["content"]]
    assert plan["metadata"]["event_at"].startswith("2026-12-04")  # the Friday after the Monday it was said
    assert plan["occurred_at"].startswith("2026-11-30") and plan["metadata"]["said_at"].startswith("2026-11-30")
    [race] = [m for m in items if m["category"] != "interaction" and "half marathon" in m["content"]]
    assert race["occurred_at"].startswith("2026-11-28") and race["metadata"]["event_at"].startswith("2026-11-28")
    [coffee] = [m for m in items if m["category"] == "preference" and "coffee" in m["content"]]
    assert "prefer it that way" in coffee["content"]  # one self-contained fact, not the fragment alone

    found = await client.post("/v1/search", json={"user_id": user, "query": "when is my meeting with Tom?",
                                                  "limit": 5})
    assert found.status_code == 200, found.text
    dated = [r for r in found.json()["results"]
             if (r.get("metadata") or {}).get("event_at", "").startswith("2026-12-04")]
    assert dated, found.json()["results"]

    context = await client.get("/v1/context/global", params={"user_id": user, "format": "markdown"})
    assert context.status_code == 200, context.text
    assert "coffee" in context.text.casefold()
