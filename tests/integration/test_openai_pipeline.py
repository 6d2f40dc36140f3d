"""The real worker and the real `openai` client against a local fake OpenAI-compatible server (docs/llm.md):
extraction and embeddings through the provider, a JSON-mode-only server, repair, the offline fallback of a window,
429 with Retry-After, 5xx and the fallback model, roles reaching the resolution gate, /health, and an embedding
dimension the server does not answer refused at start."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from scripts.bench import graph_probe as probe
from service.ai.openai.embedder import EmbeddingDimensionError
from service.core.kv import aw
from service.deps import Deps
from service.stores.vector import MemoryFilter
from tests.conftest import unique
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.conftest import running_app, wait_task

PRIMARY, FALLBACK, EMBED = "llama3.1:8b", "qwen2.5:14b", "nomic-embed-text"

FACTS = {
    "facts": [
        {"content": "The user prefers Neovim over VS Code.", "category": "preference", "scope": "global",
         "entities": [{"name": "user", "type": "person", "role": None}, {"name": "Neovim", "type": "tool",
                                                                          "role": "editor"}],
         "relations": [{"subject": "user", "predicate": "prefers", "object": "Neovim",
                        "fact": "The user prefers Neovim over VS Code."}],
         "valid_at": None, "source_messages": [0]},
        {"content": "The billing service uses PostgreSQL 16.", "category": "tech_stack", "scope": "project",
         "entities": [{"name": "billing service", "type": "project", "role": None},
                      {"name": "PostgreSQL", "type": "database", "role": None}],
         "relations": [{"subject": "billing service", "predicate": "uses", "object": "PostgreSQL",
                        "fact": "The billing service uses PostgreSQL 16."}],
         "valid_at": "2026-03-01", "source_messages": [2]},
    ]
}
MESSAGES = [
    {"role": "user", "content": "I really prefer Neovim over VS Code."},
    {"role": "assistant", "content": "Got it."},
    {"role": "user", "content": "Since March the billing service runs on PostgreSQL 16."},
]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(embedding_dim=64) as server:
        yield server


def provider_settings(fake: FakeOpenAI, **overrides: Any) -> dict[str, Any]:
    return {"llm_provider": "openai", "openai_base_url": fake.base_url, "llm_model": PRIMARY,
            "llm_fallback_model": FALLBACK, "embedder": "openai", "openai_embedding_model": EMBED,
            "openai_embedding_dim": 64, **overrides}


@pytest.fixture(scope="module")
async def openai_stack(fake: FakeOpenAI,
                       tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    async with running_app(tmp_path_factory.mktemp("openai"), **provider_settings(fake)) as pair:
        yield pair


async def _run(client: httpx.AsyncClient, user: str, messages: list[dict[str, str]] | None = None,
               project: str | None = "billing") -> dict[str, Any]:
    body: dict[str, Any] = {"messages": messages or MESSAGES, "user_id": user}
    if project:
        body["project_id"] = project
    resp = await client.post("/v1/memories", json=body)
    assert resp.status_code == 202, resp.text
    return await wait_task(client, resp.json()["task_id"], timeout=60)


async def test_extraction_and_embeddings_through_the_provider_land_in_both_stores(
        openai_stack: tuple[httpx.AsyncClient, Deps], fake: FakeOpenAI) -> None:
    client, deps = openai_stack
    fake.reset()
    fake.respond_with(FACTS)
    fake.usage = (2000, 30)
    user = unique("oai")
    done = await _run(client, user)
    assert done["status"] == "completed", done
    result = done["result"]
    assert result["extractor"] == PRIMARY
    assert result["usage"]["prompt_tokens"] == 2000 and result["usage"]["calls"] == 1
    memories = result["memories"]
    assert [m["category"] for m in memories] == ["preference", "tech_stack", "interaction", "interaction"]
    assert memories[1]["scope"] == "project" and memories[1]["source_message_ids"] == ["2"]
    [call] = fake.calls("chat")
    assert call.format == "json_schema" and "[2] user: Since March" in call.prompt
    assert fake.models("embeddings") and deps.embedder.name == f"openai:{EMBED}:64"

    assert await deps.vectors.count(MemoryFilter(user_id=user, project_id="billing")) == 4
    assert await probe.count_memories(deps.graph, user) == 4
    rels = {(r["source"], r["predicate"], r["target"]): r for r in await probe.relations(deps.graph, user)}
    assert ("user", "prefers", "Neovim") in rels
    assert rels[("billing service", "uses", "PostgreSQL")]["valid_at"] == "2026-03-01T00:00:00+00:00"

    # searched with the server's embeddings
    search = await client.post("/v1/search", json={"query": "The user prefers Neovim over VS Code.", "user_id": user})
    assert search.json()["results"][0]["content"] == "The user prefers Neovim over VS Code."

    health = (await client.get("/health")).json()
    assert health["extractor"] == "openai"
    assert health["llm"]["provider"] == "openai" and health["llm"]["model"] == PRIMARY
    assert health["llm"]["fallback_model"] == FALLBACK
    assert health["llm"]["structured_output"] == {PRIMARY: "json_schema"}


async def test_a_json_mode_only_server_completes_and_health_says_so(openai_stack: tuple[httpx.AsyncClient, Deps],
                                                                    fake: FakeOpenAI) -> None:
    client, deps = openai_stack
    fake.reset()
    fake.respond_with(FACTS)
    fake.reject_formats = {"json_schema"}
    done = await _run(client, unique("oai-json"))
    assert done["status"] == "completed", done
    assert [m["category"] for m in done["result"]["memories"]][:2] == ["preference", "tech_stack"]
    assert [c.format for c in fake.calls("chat")] == ["json_schema", "json_object"]
    health = (await client.get("/health")).json()
    assert health["llm"]["structured_output"] == {PRIMARY: "json_object"}
    # shared in Redis too: an API process whose worker runs apart shows what the worker found
    shared = await aw(deps.redis.hgetall(f"{deps.settings.redis.queue_name}:llm-modes"))
    assert {k.decode(): v.decode() for k, v in shared.items()} == {f"{fake.base_url} {PRIMARY}": "json_object"}
    deps.extractor.chat.modes._trying.clear()  # type: ignore[attr-defined]  # the next tests' server takes schemas
    deps.extractor.chat.modes._accepted.clear()  # type: ignore[attr-defined]


async def test_a_malformed_answer_is_repaired(openai_stack: tuple[httpx.AsyncClient, Deps], fake: FakeOpenAI) -> None:
    client, _ = openai_stack
    fake.reset()
    fake.respond_with(FACTS)
    fake.script(PRIMARY, ["malformed"])
    done = await _run(client, unique("oai-repair"))
    assert done["status"] == "completed", done
    assert done["result"]["extractor"] == PRIMARY
    assert len(done["result"]["memories"]) == 4  # 2 facts, 2 windows
    assert [len(c.messages) for c in fake.calls("chat")] == [2, 4]  # the repair shows the answer and its error


async def test_answers_invalid_twice_complete_with_the_offline_extractor_never_failed(
        openai_stack: tuple[httpx.AsyncClient, Deps], fake: FakeOpenAI) -> None:
    client, _ = openai_stack
    fake.reset()
    fake.script(PRIMARY, ["malformed", "I am sorry, I can only chat."])
    messages = [{"role": "user", "content": "I prefer tabs over spaces."}, {"role": "assistant", "content": "OK."},
                {"role": "user", "content": "I live in Lisbon."}]
    done = await _run(client, unique("oai-offline"), messages, project=None)
    assert done["status"] == "completed", done
    result = done["result"]
    assert result["extractor"] == "openai+offline"
    contents = [m["content"] for m in result["memories"]]
    facts = [m for m in result["memories"] if m["category"] != "interaction"]
    assert facts, contents  # the offline rules' facts
    # and every message verbatim, as always (a window whose text a fact holds is that fact): nothing said is dropped
    assert all(any(m["content"] in c for c in contents) for m in messages), contents


async def test_429_with_retry_after_then_an_answer(openai_stack: tuple[httpx.AsyncClient, Deps],
                                                   fake: FakeOpenAI) -> None:
    client, _ = openai_stack
    fake.reset()
    fake.respond_with(FACTS)
    fake.retry_after = "1"
    fake.script(PRIMARY, [429])
    done = await _run(client, unique("oai-429"))
    assert done["status"] == "completed", done
    assert done["result"]["extractor"] == PRIMARY
    first, second = fake.calls("chat")
    assert first.answered == "429" and second.at - first.at >= 0.9


async def test_5xx_then_the_fallback_model(openai_stack: tuple[httpx.AsyncClient, Deps], fake: FakeOpenAI) -> None:
    client, _ = openai_stack
    fake.reset()
    fake.respond_with(FACTS)
    fake.script(PRIMARY, [503, 500, 502, 503])
    done = await _run(client, unique("oai-5xx"))
    assert done["status"] == "completed", done
    assert done["result"]["extractor"] == FALLBACK
    assert fake.models("chat") == [PRIMARY] * 4 + [FALLBACK]


async def test_the_roles_the_provider_states_keep_two_people_of_one_name_apart(
        openai_stack: tuple[httpx.AsyncClient, Deps], fake: FakeOpenAI) -> None:
    client, deps = openai_stack
    user = unique("oai-roles")

    def fact(content: str, role: str) -> dict[str, object]:
        return {"content": content, "category": "personal_fact", "scope": "global",
                "entities": [{"name": "John Smith", "type": "person", "role": role}], "relations": [],
                "valid_at": None, "source_messages": [0]}

    for content, role in (("John Smith quoted $450 for the water heater valve.", "the user's plumber"),
                          ("John Smith wants weekly pipeline reports by Friday.", "VP of Sales")):
        fake.reset()
        fake.respond_with({"facts": [fact(content, role)]})
        done = await _run(client, user, [{"role": "user", "content": content}], project=None)
        assert done["status"] == "completed", done
    smiths = [e for e in await probe.entities(deps.graph, user) if e["name"] == "John Smith"]
    assert len(smiths) == 2
    rows, _ = await deps.graph.curation.list_duplicates(user, None, 10, None)
    assert [(r["source"]["roles"], r["target"]["roles"], r["pair"]["match_type"]) for r in rows] == [
        (["vp of sales"], ["plumber"], "other_role")]


async def test_an_embedding_dimension_the_server_does_not_answer_is_refused_at_start(
        fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> None:
    fake.reset()
    with pytest.raises(EmbeddingDimensionError, match=r"OPENAI_EMBEDDING_DIM is 32, but nomic-embed-text .* 64"):
        async with running_app(tmp_path_factory.mktemp("oai-dim"), **provider_settings(fake, openai_embedding_dim=32)):
            pass


async def test_a_sessions_summary_by_the_provider(openai_stack: tuple[httpx.AsyncClient, Deps],
                                                  fake: FakeOpenAI) -> None:
    client, _ = openai_stack
    fake.reset()

    def answer(body: dict[str, Any], _model: str) -> dict[str, Any]:
        system = body["messages"][0]["content"]
        return {"summary": "The user moved billing to PostgreSQL 16."} if system.startswith("You summarise") else {
            "facts": []}

    fake.respond_with(answer)
    user, session = unique("oai-sum"), unique("trip")
    resp = await client.post("/v1/memories", json={"user_id": user, "session_id": session, "messages": MESSAGES})
    assert resp.status_code == 202, resp.text
    assert (await wait_task(client, resp.json()["task_id"], timeout=60))["status"] == "completed"
    got = (await client.get(f"/v1/conversations/{session}/summary", params={"user_id": user, "sentences": 2})).json()
    assert (got["method"], got["model"], got["summary"]) == ("openai", PRIMARY,
                                                              "The user moved billing to PostgreSQL 16.")
    assert "at most 2 plain sentences" in fake.calls("chat")[-1].system
