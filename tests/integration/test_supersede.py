"""Corrections in conversations (service/memory/changes.py), end to end through POST /v1/memories with the default
local embedder: a later statement of the same slot supersedes the earlier one; search and the context show the
current value, `include_superseded` shows the history with `superseded_by`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import MODEL_CACHE, unique
from tests.integration.conftest import running_app, wait_task

# (what was said first, the correction days later, a question in other words, the new value, the old value)
FORMS = [
    ("When I fly I prefer window seats.", "Actually I prefer aisle seats now.",
     "which seat should I book on the plane?", "aisle", "window"),
    ("My manager is Dana Whitfield, she's great.", "I have a new manager: Priya Raman took over the team.",
     "who is my boss?", "Priya", "Dana"),
    ("We run CI on Jenkins for the Orion repo.", "We moved CI from Jenkins to GitHub Actions for Orion.",
     "what runs our continuous integration?", "GitHub Actions", "on Jenkins for"),
    ("I drive a Honda Civic.", "I sold the Civic, now I drive a Tesla Model 3.",
     "what car do I have?", "Model 3", "I drive a Honda Civic"),
    ("Our wedding is on May 3 in Porto.", "Leo's mum moved the wedding to June 14, still in Porto.",
     "when is the wedding?", "June 14", "May 3"),
    ("The API rate limit is 100 requests per minute.", "The API rate limit is now 500 requests per minute.",
     "how many requests per minute can the API take?", "500", "100 requests"),
    ("Please call me Samantha in your replies.", "From now on, call me Sam in your replies.",
     "what name should you use for me?", "Sam in", "Samantha"),
    ("I'm vegetarian, so no meat in the meal plans.", "I'm no longer vegetarian, fish is fine in the meal plans.",
     "what can I eat in my meal plan?", "fish", "so no meat"),
    # natural wording that shares no word with what it replaces: the slot's frame, or the old value named
    ("I live in Lisbon, near the river.", "Big news: we moved to Porto last weekend!",
     "where do I live?", "Porto", "Lisbon"),
    ("My manager is Tom Becker.", "My manager is Sarah Lin now, Tom moved to another team.",
     "who is my manager?", "Sarah Lin", "Tom Becker"),
    ("I work on a project called Atlas; it's a Flask app with a PostgreSQL database.",
     "We switched Atlas from Flask to FastAPI last week.", "what framework does Atlas use?", "FastAPI",
     "it's a Flask app"),
    ("Our CI runs on Jenkins.", "Every pipeline runs on GitHub Actions now.", "what CI do we use?", "GitHub Actions",
     "runs on Jenkins"),
]


async def _say(client: httpx.AsyncClient, user: str, text: str, when: str) -> dict[str, Any]:
    resp = await client.post("/v1/memories", json={"user_id": user, "messages": [
        {"role": "user", "content": text, "timestamp": when},
        {"role": "assistant", "content": "Noted.", "timestamp": when}]})
    assert resp.status_code == 202, resp.text
    task = await wait_task(client, resp.json()["task_id"], timeout=60)
    assert task["status"] == "completed", task
    return task


async def _search(client: httpx.AsyncClient, user: str, query: str, **extra: Any) -> list[dict[str, Any]]:
    resp = await client.post("/v1/search", json={"query": query, "user_id": user, "limit": 10, **extra})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["results"])


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    async with running_app(tmp_path_factory.mktemp("supersede"), embedder="local", model_cache_dir=MODEL_CACHE) as pair:
        yield pair


@pytest.mark.parametrize(("first", "later", "question", "new", "old"), FORMS, ids=[f[4] for f in FORMS])
async def test_a_correction_supersedes_what_it_corrects(app: Any, first: str, later: str, question: str, new: str,
                                                        old: str) -> None:
    client, _ = app
    user = unique("supersede")
    await _say(client, user, "The weather is lovely today, I might go for a walk.", "2026-11-02T09:00:00Z")
    await _say(client, user, first, "2026-11-03T09:00:00Z")
    await _say(client, user, later, "2026-11-20T18:00:00Z")

    results = await _search(client, user, question)
    assert results and new.casefold() in results[0]["content"].casefold(), [r["content"] for r in results]
    assert not any(old.casefold() in r["content"].casefold() and new.casefold() not in r["content"].casefold()
                   for r in results), [r["content"] for r in results]

    context = await client.get("/v1/context/global", params={"user_id": user, "format": "markdown"})
    assert context.status_code == 200
    text = context.text.casefold()
    assert new.casefold() in text
    for line in text.splitlines():  # the old value only as the dated history of the current one, if at all
        if old.casefold() in line.replace(later.casefold(), ""):
            assert " → " in line and line.endswith(", current)") and line.index(old.casefold()) < line.index(
                later.casefold()), line

    history = await _search(client, user, question, include_superseded=True)
    stale = [r for r in history if old.casefold() in r["content"].casefold() and r["superseded_by"]]
    assert stale, [(r["content"], r["superseded_by"]) for r in history]
    current = {r["id"]: r for r in history}
    assert all(r["superseded_by"] in current or r["superseded_by"] for r in stale)
    assert all(r["superseded_by"] is None for r in results)


async def test_a_relative_moving_replaces_nobody_elses_city(app: Any) -> None:
    client, _ = app
    user = unique("supersede-family")
    await _say(client, user, "My sister lives in Lyon with her kids.", "2026-11-03T09:00:00Z")
    await _say(client, user, "I live in Lisbon, near the river.", "2026-11-04T09:00:00Z")
    await _say(client, user, "My brother just moved to Berlin for a new job.", "2026-11-20T18:00:00Z")
    history = await _search(client, user, "where does my sister live?", include_superseded=True)
    assert any("Lyon" in r["content"] for r in history)
    assert not any(r["superseded_by"] for r in history), [(r["content"], r["superseded_by"]) for r in history]
    context = await client.get("/v1/context/global", params={"user_id": user, "format": "markdown"})
    assert "lyon" in context.text.casefold() and "lisbon" in context.text.casefold() and " → " not in context.text


async def test_a_change_of_something_else_supersedes_nothing(app: Any) -> None:
    client, _ = app
    user = unique("supersede-other")
    await _say(client, user, "When I fly I prefer window seats.", "2026-11-03T09:00:00Z")
    await _say(client, user, "Actually, I'd like a vegetarian meal on the flight from now on.", "2026-11-20T18:00:00Z")
    results = await _search(client, user, "which seat do I like on planes?")
    assert any("window seats" in r["content"] for r in results)
    history = await _search(client, user, "which seat do I like on planes?", include_superseded=True)
    assert not any(r["superseded_by"] for r in history)


async def test_within_one_conversation_the_later_message_wins(app: Any) -> None:
    client, _ = app
    user = unique("supersede-one")
    resp = await client.post("/v1/memories", json={"user_id": user, "messages": [
        {"role": "user", "content": "Book the hotel, my budget is 120 euros a night."},
        {"role": "assistant", "content": "Looking for hotels under 120 euros."},
        {"role": "user", "content": "Actually the hotel budget is now 150 euros a night."},
        {"role": "assistant", "content": "Updated to 150 euros."}]})
    task = await wait_task(client, resp.json()["task_id"], timeout=60)
    assert task["status"] == "completed", task
    results = await _search(client, user, "how much can I spend on the hotel per night?")
    assert "150" in results[0]["content"]
    assert not any("120" in r["content"] and "150" not in r["content"] for r in results)


async def test_a_transcript_of_two_people_supersedes_nothing(app: Any) -> None:
    """Labelled lines ("Caroline: ...") are a record of what people said to each other: chatter full of "now" and
    "new" is not told apart from a correction by rules, so nothing of it is superseded."""
    client, _ = app
    user = unique("supersede-chat")
    for when, lines in (("2026-11-03T09:00:00Z", ["Caroline: I paint landscapes in my studio on weekends.",
                                                 "Melanie: That sounds lovely, I paint too."]),
                        ("2026-11-20T18:00:00Z", ["Caroline: I paint portraits now, mostly in my new studio.",
                                                 "Melanie: Portraits are hard, good for you!"])):
        resp = await client.post("/v1/memories", json={"user_id": user, "messages": [
            {"role": "user", "content": line, "timestamp": when} for line in lines]})
        task = await wait_task(client, resp.json()["task_id"], timeout=60)
        assert task["status"] == "completed", task
    history = await _search(client, user, "what does Caroline paint?", include_superseded=True)
    assert any("landscapes" in r["content"] for r in history)
    assert not any(r["superseded_by"] for r in history)
