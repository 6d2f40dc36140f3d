"""The OpenAI-compatible provider (docs/llm.md): the real `openai` client against a local fake server at the HTTP
boundary. Structured-output modes, repair, the offline fallback per window, 429 with Retry-After, 5xx and the
fallback model, embeddings and their dimension, summaries, and the provider chosen from settings."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from openai import AsyncOpenAI
from prometheus_client import REGISTRY

from service.ai.extraction import Message
from service.ai.llm.retry import Malformed
from service.ai.openai.client import ChatClient, make_client, parse_json_answer, strict_schema
from service.ai.openai.embedder import EmbeddingDimensionError, OpenAIEmbedder, check_dimension
from service.ai.openai.extractor import OpenAIExtractor
from service.ai.openai.summaries import OpenAICommunitySummarizer, OpenAISummarizer
from service.core.errors import DependencyUnavailable
from service.core.settings import Settings, env_names, load_settings
from tests.fakes.openai_server import FakeOpenAI

PRIMARY, FALLBACK = "small-model", "bigger-model"
class Fast(TypedDict):
    base_delay_s: float
    max_delay_s: float


FAST: Fast = {"base_delay_s": 0.001, "max_delay_s": 2.0}

TABS = {
    "content": "User prefers tabs over spaces.",
    "category": "preference",
    "scope": "global",
    "entities": [{"name": "user", "type": "person", "role": None}, {"name": "tabs", "type": "concept", "role": None}],
    "relations": [{"subject": "user", "predicate": "Prefers", "object": "tabs", "fact": "User prefers tabs."}],
    "valid_at": None,
    "source_messages": [0],
}
PLUMBER = {
    "content": "John Smith is the user's plumber.",
    "category": "personal_fact",
    "scope": "global",
    "entities": [{"name": "John Smith", "type": "person", "role": "plumber"}],
    "relations": [],
    "valid_at": "2026-03-01",
    "source_messages": [2],
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(hang_seconds=1.0) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeOpenAI) -> FakeOpenAI:
    server.reset()
    return server


@pytest.fixture
async def client(server: FakeOpenAI) -> AsyncIterator[AsyncOpenAI]:
    c = make_client(server.base_url, None, timeout_s=10)
    yield c
    await c.close()


def chat(client: AsyncOpenAI, **kw: Any) -> ChatClient:
    return ChatClient(client, "fake", **{**FAST, **kw})


def extractor(client: AsyncOpenAI, fallback: str | None = FALLBACK, **kw: Any) -> OpenAIExtractor:
    return OpenAIExtractor(chat(client), PRIMARY, fallback, **kw)


def conversation(*texts: str) -> list[Message]:
    roles = ["user", "assistant"]
    return [Message(role=roles[i % 2], content=t) for i, t in enumerate(texts)]  # type: ignore[arg-type]


MSGS = ("I prefer tabs over spaces.", "Noted.", "Since March John Smith is my plumber.")


def tokens(model: str, kind: str) -> float:
    return REGISTRY.get_sample_value("memory_llm_tokens_total", {"stage": "extract", "model": model,
                                                                 "kind": kind}) or 0.0


# --- structured output -------------------------------------------------------------------


async def test_a_schema_answer_is_validated_with_roles_and_valid_at(fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    fake.respond_with({"facts": [TABS, PLUMBER, {**TABS, "content": "Gossip.", "category": "gossip"}]})
    fake.usage = (2000, 20)
    before = tokens(PRIMARY, "prompt")
    ex = extractor(client)
    result = await ex.extract(conversation(*MSGS))
    assert result.extractor == PRIMARY and result.dropped == 1  # the unknown category is dropped
    assert [f.content for f in result.facts] == [TABS["content"], PLUMBER["content"]]
    tabs, plumber = result.facts
    assert tabs.relations[0].predicate == "prefers"
    assert plumber.entities[0].role == "plumber" and plumber.valid_at == "2026-03-01"
    assert plumber.source_messages == [2]
    assert result.usage.prompt_tokens == 2000 and result.usage.calls == 1
    assert tokens(PRIMARY, "prompt") - before == 2000
    [call] = fake.calls("chat")
    assert call.format == "json_schema"
    fmt = call.body["response_format"]["json_schema"]
    assert fmt["strict"] is True
    fact_schema = fmt["schema"]["$defs"]["SchemaFact"]
    assert fact_schema["additionalProperties"] is False and "valid_at" in fact_schema["required"]
    assert "I prefer tabs" in call.prompt and "[2] user: Since March" in call.prompt
    assert "CATEGORIES" in call.system
    assert ex.chat.modes.snapshot() == {PRIMARY: "json_schema"}
    assert dict(ex.outcomes) == {"first_try": 1}


async def test_a_json_mode_only_server_is_asked_in_json_mode_and_remembered(fake: FakeOpenAI,
                                                                             client: AsyncOpenAI) -> None:
    fake.reject_formats = {"json_schema"}
    fake.respond_with({"facts": [TABS]})
    ex = extractor(client)
    result = await ex.extract(conversation(*MSGS))
    assert [f.content for f in result.facts] == [TABS["content"]]
    assert [(c.format, c.answered) for c in fake.calls("chat")] == [("json_schema", "400 json_schema"),
                                                                    ("json_object", "ok")]
    assert '"facts"' in fake.calls("chat")[1].system  # the schema goes into the prompt instead
    assert ex.chat.modes.snapshot() == {PRIMARY: "json_object"}
    fake.requests.clear()
    await ex.extract(conversation(*MSGS))  # learned: no refused request any more
    assert [c.format for c in fake.calls("chat")] == ["json_object"]


async def test_a_format_refused_with_a_500_naming_it_is_a_refusal_not_an_outage(fake: FakeOpenAI,
                                                                               client: AsyncOpenAI) -> None:
    """llama-cpp-python's server answers `response_format: json_schema` with 500 and a validation error."""
    fake.reject_formats = {"json_schema"}
    fake.reject_status = 500
    fake.respond_with({"facts": [TABS]})
    ex = extractor(client)
    result = await ex.extract(conversation(*MSGS))
    assert result.extractor == PRIMARY and len(result.facts) == 1
    assert [(c.format, c.answered) for c in fake.calls("chat")] == [("json_schema", "500 json_schema"),
                                                                    ("json_object", "ok")]
    assert fake.calls("chat")[1].body["response_format"]["schema"]["required"] == ["facts"]


async def test_answers_are_capped_and_a_model_refusing_max_tokens_gets_max_completion_tokens(
        fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    """As OpenAI's reasoning models: `max_tokens` and a temperature of 0 are refused (400); asked again without."""
    fake.respond_with({"facts": [TABS]})
    fake.refuse_max_tokens = fake.refuse_temperature = True
    ex = OpenAIExtractor(chat(client, max_output_tokens=2048), PRIMARY)
    assert len((await ex.extract(conversation(*MSGS))).facts) == 1
    tokens_refused, temperature_refused, answered = fake.calls("chat")
    assert tokens_refused.body["max_tokens"] == 2048 and answered.body["max_completion_tokens"] == 2048
    assert temperature_refused.body["temperature"] == 0.0 and "temperature" not in answered.body
    assert answered.format == "json_schema"  # not taken for a refused response format
    fake.requests.clear()
    await ex.extract(conversation(*MSGS))
    assert [c.answered for c in fake.calls("chat")] == ["ok"]


async def test_a_template_that_drops_the_system_message_gets_the_instructions_in_the_user_turn(
        fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    """llama-cpp-python's Gemma chat format leaves the system message out: the prompt tokens the server counts give
    it away, and the instructions move to the start of the first user turn for that model."""
    fake.respond_with({"facts": [TABS]})
    fake.drop_system = True
    ex = extractor(client)
    assert len((await ex.extract(conversation(*MSGS))).facts) == 1
    dropped, folded = fake.calls("chat")
    assert dropped.messages[0]["role"] == "system"
    assert [m["role"] for m in folded.messages] == ["user"]
    assert folded.messages[0]["content"].startswith("You extract long-term memories")
    assert "[2] user: Since March" in folded.messages[0]["content"]
    fake.requests.clear()
    await ex.extract(conversation(*MSGS))
    assert len(fake.calls("chat")) == 1 and fake.calls("chat")[0].messages[0]["role"] == "user"


async def test_a_server_without_json_modes_answers_in_a_fenced_block(fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    fake.reject_formats = {"json_schema", "json_object"}
    fake.respond_with({"facts": [TABS]})
    fake.script(PRIMARY, ["fenced"])
    ex = extractor(client)
    result = await ex.extract(conversation(*MSGS))
    assert [f.content for f in result.facts] == [TABS["content"]]
    assert [c.format for c in fake.calls("chat")] == ["json_schema", "json_object", "text"]
    assert ex.chat.modes.snapshot() == {PRIMARY: "text"}


def test_tolerant_parsing_and_the_strict_schema() -> None:
    assert parse_json_answer('{"facts": []}') == {"facts": []}
    assert parse_json_answer('Sure!\n```json\n{"facts": [1]}\n```') == {"facts": [1]}
    assert parse_json_answer('Answer: {"facts": [2]} hope it helps') == {"facts": [2]}
    with pytest.raises(Malformed):
        parse_json_answer("I cannot help with that.")
    with pytest.raises(Malformed):
        parse_json_answer("")
    from service.ai.llm.summaries import CommunityAnswer

    schema = strict_schema(CommunityAnswer)
    assert schema["required"] == ["summary"] and schema["additionalProperties"] is False
    assert "minLength" not in schema["properties"]["summary"]


# --- repair and the offline fallback ----------------------------------------------------


async def test_a_malformed_answer_gets_one_repair_request_showing_its_error(fake: FakeOpenAI,
                                                                           client: AsyncOpenAI) -> None:
    fake.respond_with({"facts": [TABS]})
    fake.script(PRIMARY, ["malformed"])
    ex = extractor(client)
    result = await ex.extract(conversation(*MSGS))
    assert result.extractor == PRIMARY and [f.content for f in result.facts] == [TABS["content"]]
    _, repair = fake.calls("chat")
    turns = repair.messages
    assert [m["role"] for m in turns] == ["system", "user", "assistant", "user"]
    assert turns[2]["content"].startswith('{"facts": [{"content": "User prefers tabs"')  # its own answer
    assert "not JSON" in turns[3]["content"]  # and what was wrong with it
    assert dict(ex.outcomes) == {"repaired": 1}
    assert result.usage.calls == 2


async def test_an_answer_whose_every_fact_is_invalid_is_repaired(fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    fake.script(PRIMARY, [{"facts": [{**TABS, "category": "likes"}]}, {"facts": [TABS]}])
    ex = extractor(client)
    result = await ex.extract(conversation(*MSGS))
    assert [f.category for f in result.facts] == ["preference"]
    assert "unknown category 'likes'" in fake.calls("chat")[1].messages[-1]["content"]


async def test_invalid_twice_falls_back_to_the_offline_extractor_for_that_window_alone(
        fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    msgs = conversation("I prefer tabs over spaces in every editor I use, and I have done so for many years now.",
                        "Noted.", "I live in Lisbon, in a small flat near the river, and have lived there since 2019.",
                        "Nice.")

    fake.respond_with({"facts": [TABS]})
    fake.script(PRIMARY, ["ok", "malformed", "not json either"])  # the second window, twice
    ex = extractor(client, window_chars=200)  # two windows of two messages
    result = await ex.extract(msgs)
    assert len(fake.calls("chat")) == 3
    assert result.extractor == "openai+offline"
    first, *offline = result.facts
    assert first.content == TABS["content"] and first.source_messages == [0]
    lisbon = [f for f in offline if "Lisbon" in f.content]  # the offline extractor kept what was said there
    assert lisbon and all(f.source_messages == [2] for f in lisbon)  # its indexes are the conversation's
    assert dict(ex.outcomes) == {"offline": 1, "first_try": 1}


# --- rate limits, 5xx, the fallback model --------------------------------------------------


async def test_429_waits_for_retry_after(fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    fake.respond_with({"facts": [TABS]})
    fake.retry_after = "1"
    fake.script(PRIMARY, [429])
    result = await extractor(client).extract(conversation(*MSGS))
    assert result.extractor == PRIMARY and len(result.facts) == 1
    first, second = fake.calls("chat")
    assert first.answered == "429" and second.at - first.at >= 0.9  # the server's hint, not the 1 ms backoff


async def test_5xx_then_the_fallback_model(fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    fake.respond_with({"facts": [TABS]})
    fake.script(PRIMARY, [503, 500, 502, 503])

    def calls(model: str, outcome: str) -> float:
        return REGISTRY.get_sample_value("memory_llm_calls_total", {"stage": "extract", "model": model,
                                                                    "outcome": outcome}) or 0.0

    before = (calls(PRIMARY, "retried"), calls(PRIMARY, "failed"), calls(FALLBACK, "ok"))
    result = await extractor(client).extract(conversation(*MSGS))
    assert result.extractor == FALLBACK
    assert fake.models("chat") == [PRIMARY] * 4 + [FALLBACK]
    after = (calls(PRIMARY, "retried"), calls(PRIMARY, "failed"), calls(FALLBACK, "ok"))
    assert [a - b for a, b in zip(after, before, strict=True)] == [3, 1, 1]


async def test_both_models_unavailable_is_a_dependency_error(fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    fake.script(PRIMARY, [503] * 4)
    fake.script(FALLBACK, [503] * 4)
    with pytest.raises(DependencyUnavailable):  # the job is retried later, like Gemini's
        await extractor(client).extract(conversation(*MSGS))


# --- embeddings ------------------------------------------------------------------------------


async def test_embeddings_are_unit_length_and_their_dimension_checked(fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    emb = OpenAIEmbedder(client, "nomic-embed-text", 64, batch_size=2, **FAST)
    vectors = await emb.embed(["a", "b", "c"])
    assert len(vectors) == 3 and all(len(v) == 64 for v in vectors)
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-6) for v in vectors)
    assert len(fake.calls("embeddings")) == 2 and "dimensions" not in fake.calls("embeddings")[0].body
    assert await emb.embed_query("a") == vectors[0]
    await check_dimension(emb, "fake")
    wrong = OpenAIEmbedder(client, "nomic-embed-text", 32, **FAST)
    with pytest.raises(EmbeddingDimensionError, match=r"OPENAI_EMBEDDING_DIM is 32, but nomic-embed-text .* 64"):
        await check_dimension(wrong, "fake")
    reduced = OpenAIEmbedder(client, "text-embedding-3-small", 32, **FAST)  # OpenAI's models are asked for it
    assert len((await reduced.embed(["x"]))[0]) == 32
    assert fake.calls("embeddings")[-1].body["dimensions"] == 32


# --- summaries -------------------------------------------------------------------------------


async def test_summaries_go_through_the_provider(fake: FakeOpenAI, client: AsyncOpenAI) -> None:
    fake.respond_with({"summary": "  The user set up   tabs.  "})
    summary, model = await OpenAISummarizer(chat(client), PRIMARY, FALLBACK).summarise(
        [("user", "I prefer tabs.")], 3)
    assert (summary, model) == ("The user set up tabs.", PRIMARY)
    assert "at most 3 plain sentences" in fake.calls("chat")[0].system
    fake.script(PRIMARY, [503] * 4)
    _, model = await OpenAISummarizer(chat(client), PRIMARY, FALLBACK).summarise([("user", "x")], 3)
    assert model == FALLBACK
    fake.respond_with({"summary": "Tools of the billing project."})
    text = await OpenAICommunitySummarizer(chat(client), PRIMARY).summarise([("Qdrant", "tool")], ["uses Qdrant"])
    assert text == "Tools of the billing project."
    assert "ENTITIES\n- Qdrant (tool)" in fake.calls("chat")[-1].prompt


# --- settings ----------------------------------------------------------------------------------


def settings(**kw: Any) -> Settings:
    return Settings(_env_file=None, **kw)  # type: ignore[call-arg]


def test_the_provider_is_chosen_from_settings(tmp_path: Path) -> None:
    from service.ai.gemini.extractor import GeminiExtractor
    from service.ai.gemini.summaries import GeminiCommunitySummarizer, GeminiSummarizer
    from service.deps import build_ai, build_providers

    base = {"embedder": "hash", "data_dir": tmp_path}
    assert settings(**base).resolved_llm_provider == "offline"
    assert settings(**base, google_api_key="k").resolved_llm_provider == "gemini"
    chosen = settings(**base, google_api_key="k", llm_provider="openai", openai_base_url="http://127.0.0.1:9/v1",
                      llm_model="qwen2.5:7b", llm_fallback_model="llama3.1:8b")
    providers = build_providers(chosen)
    assert set(providers) == {"openai"}  # the Gemini key is not used for extraction, nor for embeddings
    _, extractor_ = build_ai(chosen, providers)
    assert isinstance(extractor_, OpenAIExtractor) and extractor_.fallback_model == "llama3.1:8b"
    llm = providers["openai"]
    assert isinstance(llm.summarizer(), OpenAISummarizer)
    assert isinstance(llm.community_summarizer(), OpenAICommunitySummarizer)
    # the same shape for Gemini: one provider object makes the extractor and both summarizers
    gemini = build_providers(settings(**base, google_api_key="k"))
    assert set(gemini) == {"gemini"}
    _, extractor_ = build_ai(settings(**base, google_api_key="k"), gemini)
    assert isinstance(extractor_, GeminiExtractor)
    assert isinstance(gemini["gemini"].summarizer(), GeminiSummarizer)
    assert isinstance(gemini["gemini"].community_summarizer(), GeminiCommunitySummarizer)
    offline = settings(**base, google_api_key="k", llm_provider="offline")
    assert build_providers(offline) == {}
    _, extractor_ = build_ai(offline, {})
    assert extractor_.name == "offline"
    extractor_.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize(("env", "line"), [
    ({"llm_provider": "openai", "openai_base_url": "http://127.0.0.1:11434/v1"},
     "LLM_PROVIDER=openai needs LLM_MODEL (the model the server serves; docs/llm.md)"),
    ({"llm_provider": "openai", "llm_model": "gpt-4o-mini"},
     "LLM_PROVIDER=openai needs OPENAI_BASE_URL (a local server) or OPENAI_API_KEY (api.openai.com)"),
    ({"llm_provider": "gemini"}, "LLM_PROVIDER=gemini needs GOOGLE_API_KEY"),
    ({"embedder": "openai", "openai_base_url": "http://127.0.0.1:11434/v1"},
     "EMBEDDER=openai needs OPENAI_EMBEDDING_MODEL and OPENAI_EMBEDDING_DIM"),
    ({"llm_provider": "openai", "llm_model": "m", "openai_base_url": "127.0.0.1:11434"},
     "OPENAI_BASE_URL must be an http(s) URL, e.g. http://127.0.0.1:11434/v1 (got 127.0.0.1:11434)"),
    ({"llm_provider": "claude"}, "LLM_PROVIDER: must be 'gemini', 'openai' or 'offline' (got claude)"),
])
def test_an_invalid_combination_is_one_clear_line(env: dict[str, str], line: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for name in env_names():
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as exc:
        load_settings(_env_file=None, **env)
    assert exc.value.code == line
