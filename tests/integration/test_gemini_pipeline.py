"""The real worker and the real google-genai client against a local fake of the Gemini API:
extraction and embeddings by Gemini, source messages and interaction windows, fallback model after
repeated 503s, malformed output."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from scripts.bench import graph_probe as probe
from service.deps import Deps
from service.stores.vector import MemoryFilter
from tests.conftest import unique
from tests.fakes.gemini_server import FakeGemini
from tests.integration.conftest import running_app, wait_task

PRIMARY, FALLBACK = "gemini-3-flash-preview", "gemini-2.5-flash"

FACTS: dict[str, Any] = {
    "facts": [
        {
            "content": "The user prefers Neovim over VS Code.",
            "category": "preference",
            "scope": "global",
            "entities": [{"name": "user", "type": "person"}, {"name": "Neovim", "type": "tool"}],
            "relations": [{"subject": "user", "predicate": "prefers", "object": "Neovim",
                           "fact": "The user prefers Neovim over VS Code."}],
            "valid_at": None,
            "source_messages": [0],
        },
        {
            "content": "The billing service uses PostgreSQL 16.",
            "category": "tech_stack",
            "scope": "project",
            "entities": [{"name": "billing service", "type": "project"}, {"name": "PostgreSQL", "type": "database"}],
            "relations": [{"subject": "billing service", "predicate": "uses", "object": "PostgreSQL",
                           "fact": "The billing service uses PostgreSQL 16."}],
            "valid_at": "2026-03-01",
            "source_messages": [2, 9, -1],  # 9 and -1 point at no message: dropped
        },
        {"content": "Gossip about a colleague.", "category": "gossip", "scope": "global", "entities": [],
         "relations": []},
    ]
}

MESSAGES = [
    {"role": "user", "content": "I really prefer Neovim over VS Code."},
    {"role": "assistant", "content": "Got it."},
    {"role": "user", "content": "Since March the billing service runs on PostgreSQL 16."},
]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


@pytest.fixture(scope="module")
async def gemini_stack(
    fake: FakeGemini, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    async with running_app(
        tmp_path_factory.mktemp("gemini"),
        google_api_key="test-key",
        gemini_base_url=fake.base_url,
        embedder="gemini",
        gemini_embedding_dim=64,
    ) as pair:
        yield pair


async def _run(client: httpx.AsyncClient, user: str) -> dict[str, object]:
    resp = await client.post("/v1/memories", json={"messages": MESSAGES, "user_id": user, "project_id": "billing"})
    assert resp.status_code == 202, resp.text
    return await wait_task(client, resp.json()["task_id"], timeout=60)


async def test_gemini_extraction_lands_in_both_stores(gemini_stack: tuple[httpx.AsyncClient, Deps],
                                                      fake: FakeGemini) -> None:
    client, deps = gemini_stack
    fake.reset()
    fake.respond_with(FACTS)
    fake.usage = (120, 30)
    user = unique("gem")
    done = await _run(client, user)
    assert done["status"] == "completed", done
    result = done["result"]
    assert isinstance(result, dict)
    assert result["extractor"] == PRIMARY
    assert result["dropped"] == 1  # the unknown category is dropped, never stored
    assert result["usage"]["prompt_tokens"] == 120 and result["usage"]["calls"] == 1
    memories = result["memories"]
    assert [m["category"] for m in memories] == ["preference", "tech_stack", "interaction", "interaction"]
    fact, stack, first, second = memories
    assert stack["scope"] == "project" and stack["project_id"] == "billing"
    # the model's source_messages become source ids; every message is kept as said, in windows of 2
    assert fact["source_message_ids"] == ["0"] and stack["source_message_ids"] == ["2"]
    assert first["content"] == "user: I really prefer Neovim over VS Code.\nassistant: Got it."
    assert first["source_message_ids"] == ["0", "1"]
    assert second["content"] == "user: Since March the billing service runs on PostgreSQL 16."
    assert second["source_message_ids"] == ["2"]

    # the prompt carried the user's words; embeddings came from Gemini too
    [call] = fake.calls("generateContent")
    assert "Neovim" in call.prompt and "[2] user: Since March" in call.prompt
    assert fake.models("batchEmbedContents")
    assert deps.embedder.name == "gemini:gemini-embedding-001:64"

    assert await deps.vectors.count(MemoryFilter(user_id=user, project_id="billing")) == 4
    assert await probe.count_memories(deps.graph, user) == 4
    rels = {(r["source"], r["predicate"], r["target"]): r for r in await probe.relations(deps.graph, user)}
    assert ("user", "prefers", "Neovim") in rels
    assert rels[("billing service", "uses", "PostgreSQL")]["valid_at"] == "2026-03-01T00:00:00+00:00"

    health = (await client.get("/health")).json()
    assert health["extractor"] == "gemini"

    search = await client.post("/v1/search", json={"query": "The user prefers Neovim over VS Code.", "user_id": user})
    assert search.json()["results"][0]["content"] == "The user prefers Neovim over VS Code."


async def test_gemini_sources_map_to_message_ids_and_a_window_repeating_a_fact_is_not_stored_twice(
    gemini_stack: tuple[httpx.AsyncClient, Deps], fake: FakeGemini
) -> None:
    client, deps = gemini_stack
    fake.reset()
    neovim, postgres, _ = FACTS["facts"]
    fake.respond_with({"facts": [
        {**neovim, "source_messages": [0, 2]},  # message 2 confirms message 0
        {**postgres, "source_messages": [1]},
        # the model could not tell where this came from; its text is message 4's, alone in the last window
        # (windows follow the turn: u-5 follows an assistant's message), which it absorbs
        {"content": "Deploys go through Fly.io.", "category": "tech_stack", "scope": "project", "entities": [],
         "relations": [], "source_messages": []},
    ]})
    messages = [
        {"id": "u-1", "role": "user", "content": "I really prefer Neovim over VS Code.",
         "timestamp": "2026-02-01T08:30:00-05:00"},
        {"id": "u-2", "role": "user", "content": "Since March the billing service runs on PostgreSQL 16."},
        {"id": "u-3", "role": "user", "content": "Yes, Neovim it is."},
        {"id": "a-4", "role": "assistant", "content": "Great, I'll keep that in mind."},
        {"id": "u-5", "role": "user", "content": "Deploys go through Fly.io."},
    ]
    user = unique("gem-src")
    resp = await client.post("/v1/memories", json={"messages": messages, "user_id": user, "project_id": "billing"})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"], timeout=60)
    assert done["status"] == "completed", done
    memories = done["result"]["memories"]
    got = [(m["content"], m["source_message_ids"]) for m in memories]
    assert got == [
        ("The user prefers Neovim over VS Code.", ["u-1", "u-3"]),
        ("The billing service uses PostgreSQL 16.", ["u-2"]),
        ("Deploys go through Fly.io.", ["u-5"]),
        # one speaker's two messages in a row are two windows: each keeps to its topic
        ("user: I really prefer Neovim over VS Code.", ["u-1"]),
        ("user: Since March the billing service runs on PostgreSQL 16.", ["u-2"]),
        ("user: Yes, Neovim it is.\nassistant: Great, I'll keep that in mind.", ["u-3", "a-4"]),
    ]  # no "user: Deploys go through Fly.io." window: the fact holds that text
    assert memories[0]["occurred_at"] == memories[3]["occurred_at"] == "2026-02-01T13:30:00+00:00"
    assert await deps.vectors.count(MemoryFilter(user_id=user, project_id="billing")) == 6
    record = (await client.get(f"/v1/memories/{memories[2]['id']}", params={"user_id": user})).json()
    assert record["source_message_ids"] == ["u-5"]


async def test_fallback_model_after_repeated_503(gemini_stack: tuple[httpx.AsyncClient, Deps],
                                                 fake: FakeGemini) -> None:
    client, _ = gemini_stack
    fake.reset()
    fake.respond_with(FACTS)
    fake.script(PRIMARY, [503, 503, 503, 503])

    def calls(model: str, outcome: str) -> float:
        return REGISTRY.get_sample_value(
            "memory_llm_calls_total", {"stage": "extract", "model": model, "outcome": outcome}) or 0.0

    before = (calls(PRIMARY, "retried"), calls(PRIMARY, "failed"), calls(FALLBACK, "ok"))
    done = await _run(client, unique("fallback"))
    assert done["status"] == "completed", done
    assert done["result"]["extractor"] == FALLBACK  # type: ignore[index]
    assert fake.models("generateContent") == [PRIMARY] * 4 + [FALLBACK]
    # the per-call LLM metrics: 3 retried 503s and the last one given up on, then the fallback's answer
    after = (calls(PRIMARY, "retried"), calls(PRIMARY, "failed"), calls(FALLBACK, "ok"))
    assert [a - b for a, b in zip(after, before, strict=True)] == [3, 1, 1]


async def test_malformed_output_is_retried_then_reported(gemini_stack: tuple[httpx.AsyncClient, Deps],
                                                         fake: FakeGemini) -> None:
    client, _ = gemini_stack
    fake.reset()
    fake.respond_with(FACTS)
    fake.script(PRIMARY, ["malformed"])
    recovered = await _run(client, unique("malformed1"))
    assert recovered["status"] == "completed"
    assert len(recovered["result"]["memories"]) == 4  # type: ignore[index]  # 2 facts, 2 windows

    fake.reset()
    fake.script(PRIMARY, ["malformed"] * 10)
    fake.script(FALLBACK, ["malformed"] * 10)
    failed = await _run(client, unique("malformed2"))
    assert failed["status"] == "failed"
    assert "json" in str(failed["error"]).lower()


async def test_the_roles_gemini_states_keep_two_people_of_one_name_apart(
    gemini_stack: tuple[httpx.AsyncClient, Deps], fake: FakeGemini
) -> None:
    """Gemini's `role` per entity (docs/identity.md, Meanings): two conversations about two John Smiths, which the
    facts' texts alone do not tell apart ("John Smith ..."), are two entities and a pending pair, not one."""
    client, deps = gemini_stack
    user = unique("roles")

    def fact(content: str, role: str) -> dict[str, object]:
        return {"content": content, "category": "personal_fact", "scope": "global",
                "entities": [{"name": "John Smith", "type": "person", "role": role}], "relations": [],
                "source_messages": [0]}

    for content, role in (("John Smith quoted $450 for the water heater valve.", "the user's plumber"),
                          ("John Smith wants weekly pipeline reports by Friday.", "VP of Sales")):
        fake.reset()
        fake.respond_with({"facts": [fact(content, role)]})
        resp = await client.post("/v1/memories", json={"messages": [{"role": "user", "content": content}],
                                                       "user_id": user})
        assert resp.status_code == 202, resp.text
        assert (await wait_task(client, resp.json()["task_id"], timeout=60))["status"] == "completed"
    smiths = [e for e in await probe.entities(deps.graph, user) if e["name"] == "John Smith"]
    assert len(smiths) == 2
    rows, _ = await deps.graph.curation.list_duplicates(user, None, 10, None)
    assert [(r["source"]["roles"], r["target"]["roles"], r["pair"]["match_type"]) for r in rows] == [
        (["vp of sales"], ["plumber"], "other_role")]
