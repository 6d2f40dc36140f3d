"""Gemini extractor and embedder: the real google-genai client against the fake server."""

from __future__ import annotations

import math
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypedDict

import pytest
from google import genai

from service.ai.extraction import Message
from service.ai.gemini.client import GeminiRequestError, GeminiResponseError, GeminiUnavailable, make_client
from service.ai.gemini.embedder import GeminiEmbedder
from service.ai.gemini.extractor import GeminiExtractor
from service.ai.gemini.prompts import SYSTEM_INSTRUCTION
from service.core.domain import CATEGORIES
from service.core.errors import DependencyUnavailable
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.scripted import fake_embedding

PRIMARY = "gemini-3-flash-preview"
FALLBACK = "gemini-2.5-flash"
EMBED_MODEL = "gemini-embedding-001"
class Fast(TypedDict):
    base_delay_s: float
    max_delay_s: float


FAST: Fast = {"base_delay_s": 0.001, "max_delay_s": 0.005}

TABS = {
    "content": "User prefers tabs over spaces.",
    "category": "preference",
    "scope": "global",
    "entities": [{"name": "user", "type": "person"}, {"name": "tabs", "type": "concept"}],
    "relations": [{"subject": "user", "predicate": "Prefers", "object": "tabs", "fact": "User prefers tabs."}],
    "valid_at": None,
}
STACK = {
    "content": "The project uses FastAPI and Qdrant.",
    "category": "tech_stack",
    "scope": "project",
    "entities": [{"name": "FastAPI", "type": "library"}, {"name": "Qdrant", "type": "service"}],
    "relations": [
        {"subject": "project", "predicate": "uses", "object": "FastAPI", "fact": "The project uses FastAPI."},
        {"subject": "project", "predicate": "uses", "object": "Qdrant", "fact": "The project uses Qdrant."},
    ],
    "valid_at": "2025-03-01",
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGemini]:
    with FakeGemini(hang_seconds=1.0) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeGemini) -> FakeGemini:
    server.reset()
    return server


@pytest.fixture
async def client(server: FakeGemini) -> AsyncIterator[genai.Client]:
    c = make_client("test-key", base_url=server.base_url, timeout_s=10)
    yield c
    await c.aio.aclose()


def extractor(client: genai.Client, **kw: Any) -> GeminiExtractor:
    return GeminiExtractor(client, PRIMARY, FALLBACK, **{**FAST, **kw})


def conversation(*texts: str) -> list[Message]:
    roles = ["user", "assistant"]
    return [Message(role=roles[i % 2], content=t) for i, t in enumerate(texts)]  # type: ignore[arg-type]


# --- extraction ---------------------------------------------------------------------------


async def test_extracts_typed_facts_with_structured_output(fake: FakeGemini, client: genai.Client) -> None:
    fake.respond_with({"facts": [TABS, STACK]})
    fake.usage = (120, 30)
    msgs = conversation("I prefer tabs. Our project uses FastAPI and Qdrant since March.", "Noted!")

    result = await extractor(client).extract(msgs, project_id="proj-1")

    assert result.extractor == PRIMARY
    assert [f.category for f in result.facts] == ["preference", "tech_stack"]
    tabs, stack = result.facts
    assert tabs.scope == "global" and stack.scope == "project"
    assert tabs.relations[0].predicate == "prefers"  # snake_cased
    assert {e.name for e in stack.entities} >= {"FastAPI", "Qdrant", "project"}  # endpoints become entities
    assert stack.valid_at == "2025-03-01"
    assert result.dropped == 0
    assert result.usage.model_dump() == {"prompt_tokens": 120, "output_tokens": 30, "total_tokens": 150, "calls": 1}

    [req] = fake.calls("generateContent")
    assert req.path == f"/v1beta/models/{PRIMARY}:generateContent"
    assert req.headers["x-goog-api-key"] == "test-key"
    assert "I prefer tabs" in req.prompt and "Project: proj-1" in req.prompt
    assert req.system_instruction == SYSTEM_INSTRUCTION
    config = req.body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    item_schema = config["responseSchema"]["properties"]["facts"]["items"]
    assert item_schema["properties"]["category"]["enum"] == list(CATEGORIES)
    assert "temperature" not in config  # Gemini 3: API default


async def test_gemini_2_models_run_at_temperature_zero(fake: FakeGemini, client: genai.Client) -> None:
    await GeminiExtractor(client, FALLBACK, PRIMARY, **FAST).extract(conversation("I use vim"))
    assert fake.calls()[0].body["generationConfig"]["temperature"] == 0.0


async def test_unknown_category_and_malformed_items_are_dropped_and_counted(
    fake: FakeGemini, client: genai.Client
) -> None:
    bad_relation = {**TABS, "content": "User prefers dark mode.", "relations": [{"subject": "user", "predicate": "x"}]}
    fake.respond_with(
        {
            "facts": [
                TABS,
                {**TABS, "content": "User likes chess.", "category": "hobby"},  # unknown category
                {"category": "preference"},  # no content
                "just a string",  # not an object
                {**TABS, "content": ""},  # empty content
                bad_relation,  # fact kept, relation dropped
            ]
        }
    )
    result = await extractor(client).extract(conversation("I prefer tabs and dark mode, and I like chess."))

    assert [f.content for f in result.facts] == ["User prefers tabs over spaces.", "User prefers dark mode."]
    assert result.facts[1].relations == []
    assert all(f.category in CATEGORIES for f in result.facts)
    assert result.dropped == 5


async def test_project_scope_without_project_becomes_global(fake: FakeGemini, client: genai.Client) -> None:
    fake.respond_with({"facts": [STACK]})
    result = await extractor(client).extract(conversation("We use FastAPI and Qdrant."))
    assert result.facts[0].scope == "global"
    assert "Project: none" in fake.calls()[0].prompt


@pytest.mark.parametrize("code", [503, 429])
async def test_falls_back_after_retries_on_overload(fake: FakeGemini, client: genai.Client, code: int) -> None:
    fake.respond_with({"facts": [TABS]})
    fake.script(PRIMARY, [code] * 4)

    result = await extractor(client, max_retries=3).extract(conversation("I prefer tabs"))

    assert fake.models("generateContent") == [PRIMARY] * 4 + [FALLBACK]
    assert result.extractor == FALLBACK
    assert [f.content for f in result.facts] == [TABS["content"]]
    assert result.usage.calls == 1


async def test_fallback_sticks_for_the_remaining_windows(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(PRIMARY, [503, 503])
    msgs = conversation(*(f"message number {i} " + "x" * 150 for i in range(4)))
    result = await extractor(client, max_retries=1, window_chars=400).extract(msgs)
    models = fake.models("generateContent")
    assert models[:2] == [PRIMARY, PRIMARY]
    assert set(models[2:]) == {FALLBACK} and len(models) > 3
    assert result.extractor == FALLBACK


async def test_fallback_exhausted_raises_unavailable(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(PRIMARY, [503, 503]).script(FALLBACK, [503, 503])
    with pytest.raises(GeminiUnavailable) as info:
        await extractor(client, max_retries=1).extract(conversation("I prefer tabs"))
    assert isinstance(info.value, DependencyUnavailable) and info.value.status_code == 503
    assert info.value.code == 503
    assert fake.models() == [PRIMARY, PRIMARY, FALLBACK, FALLBACK]


async def test_429_then_success_retries_the_same_model(fake: FakeGemini, client: genai.Client) -> None:
    fake.respond_with({"facts": [TABS]})
    fake.script(PRIMARY, [429, 500, "ok"])
    result = await extractor(client).extract(conversation("I prefer tabs"))
    assert fake.models() == [PRIMARY, PRIMARY, PRIMARY]
    assert result.extractor == PRIMARY and len(result.facts) == 1


async def test_500_exhausted_raises_without_fallback(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(PRIMARY, [500, 500, 500])
    with pytest.raises(GeminiUnavailable):
        await extractor(client, max_retries=2).extract(conversation("I prefer tabs"))
    assert fake.models() == [PRIMARY] * 3


async def test_malformed_json_is_retried_once(fake: FakeGemini, client: genai.Client) -> None:
    fake.respond_with({"facts": [TABS]})
    fake.usage = (10, 5)
    fake.script(PRIMARY, ["malformed", "ok"])
    result = await extractor(client).extract(conversation("I prefer tabs"))
    assert fake.models() == [PRIMARY, PRIMARY]
    assert len(result.facts) == 1
    assert result.usage.calls == 2 and result.usage.prompt_tokens == 20  # the bad answer was billed too


@pytest.mark.parametrize("bad", ["malformed", "empty", '{"memories": []}'])
async def test_persistent_malformed_answer_raises_clear_error(fake: FakeGemini, client: genai.Client, bad: str) -> None:
    fake.script(PRIMARY, [bad, bad])
    with pytest.raises(GeminiResponseError, match="malformed JSON twice"):
        await extractor(client).extract(conversation("I prefer tabs"))
    assert fake.models() == [PRIMARY, PRIMARY]  # no fallback, no more attempts


async def test_non_transient_400_raises_without_retry_or_fallback(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(PRIMARY, [400])
    with pytest.raises(GeminiRequestError, match="400 INVALID_ARGUMENT") as info:
        await extractor(client).extract(conversation("I prefer tabs"))
    assert info.value.code == 400 and info.value.model == PRIMARY
    assert not isinstance(info.value, DependencyUnavailable)
    assert fake.models() == [PRIMARY]


async def test_unknown_primary_model_falls_back(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(PRIMARY, [404])
    result = await extractor(client).extract(conversation("I prefer tabs"))
    assert fake.models() == [PRIMARY, FALLBACK]
    assert result.extractor == FALLBACK


async def test_timeout_is_retried(fake: FakeGemini, client: genai.Client) -> None:
    fake.respond_with({"facts": [TABS]})
    fake.script(PRIMARY, ["hang", "ok"])
    result = await extractor(client, timeout_s=0.3).extract(conversation("I prefer tabs"))
    assert fake.models() == [PRIMARY, PRIMARY]
    assert len(result.facts) == 1


async def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        c = make_client("k", base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/", timeout_s=2)
        try:
            with pytest.raises(GeminiUnavailable):
                await GeminiExtractor(c, PRIMARY, FALLBACK, max_retries=1, **FAST).extract(conversation("hi"))
        finally:
            await c.aio.aclose()


async def test_long_conversation_is_split_into_windows_and_usage_summed(fake: FakeGemini, client: genai.Client) -> None:
    def responder(body: dict[str, Any], model: str) -> dict[str, Any]:
        text = body["contents"][0]["parts"][0]["text"]
        facts = [{**TABS}]  # every window repeats this one: deduplicated
        facts += [
            {**TABS, "content": f"User said message {i}.", "relations": []}
            for i in range(20)
            if f"message {i} " in text
        ]
        return {"facts": facts}

    fake.respond_with(responder)
    fake.usage = (100, 20)
    msgs = conversation(*(f"message {i} " + "y" * 200 for i in range(10)))
    ex = extractor(client, window_chars=1000)
    windows = ex.windows(msgs)

    result = await ex.extract(msgs)

    calls = fake.calls("generateContent")
    assert len(windows) == len(calls) == 3  # 4 + 4 + 2 messages of ~215 rendered chars
    assert [len(w) for _, w in windows] == [4, 4, 2]
    assert "[4] user: message 4 " in calls[1].prompt and "message 3 " not in calls[1].prompt
    assert result.usage.model_dump() == {"prompt_tokens": 300, "output_tokens": 60, "total_tokens": 360, "calls": 3}
    contents = [f.content for f in result.facts]
    assert contents[0] == TABS["content"] and contents.count(TABS["content"]) == 1
    assert contents[1:] == [f"User said message {i}." for i in range(10)]


async def test_single_over_long_message_is_cut(fake: FakeGemini, client: genai.Client) -> None:
    msgs = conversation("short one", "z" * 5000, "short two")
    await extractor(client, window_chars=1000).extract(msgs)
    prompts = [c.prompt for c in fake.calls()]
    assert len(prompts) == 3
    assert "[...truncated]" in prompts[1] and prompts[1].count("z") < 1000
    assert all(len(p) < 1200 for p in prompts)


async def test_empty_conversation_makes_no_call(fake: FakeGemini, client: genai.Client) -> None:
    result = await extractor(client).extract([])
    assert result.facts == [] and result.usage.calls == 0
    assert fake.calls() == []


# --- embeddings ---------------------------------------------------------------------------


def norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


async def test_embedder_batches_and_normalises(fake: FakeGemini, client: genai.Client) -> None:
    emb = GeminiEmbedder(client, EMBED_MODEL, dim=16, batch_size=4, **FAST)
    texts = [f"text number {i}" for i in range(10)]

    vectors = await emb.embed(texts)

    assert emb.name == f"gemini:{EMBED_MODEL}:16" and emb.dim == 16
    calls = fake.calls("batchEmbedContents")
    assert len(calls) == 3
    assert [len(c.body["requests"]) for c in calls] == [4, 4, 2]
    assert calls[0].path == f"/v1beta/models/{EMBED_MODEL}:batchEmbedContents"
    assert all(r["outputDimensionality"] == 16 for c in calls for r in c.body["requests"])
    assert [len(v) for v in vectors] == [16] * 10
    assert all(math.isclose(norm(v), 1.0, rel_tol=1e-9) for v in vectors)
    raw = fake_embedding("text number 7", 16)
    assert norm(raw) > 2  # the fake does not normalise; the embedder does
    assert vectors[7] == pytest.approx([x / norm(raw) for x in raw])
    assert await emb.embed([]) == []


async def test_embedder_retries_on_503(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(EMBED_MODEL, [503, 503, "ok"])
    vectors = await GeminiEmbedder(client, EMBED_MODEL, dim=8, **FAST).embed(["a", "b"])
    assert len(fake.calls("batchEmbedContents")) == 3
    assert len(vectors) == 2


async def test_embedder_gives_up_after_retries(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(EMBED_MODEL, [503] * 3)
    with pytest.raises(GeminiUnavailable):
        await GeminiEmbedder(client, EMBED_MODEL, dim=8, max_retries=2, **FAST).embed(["a"])
    assert len(fake.calls()) == 3


async def test_embedder_400_raises_at_once(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(EMBED_MODEL, [400])
    with pytest.raises(GeminiRequestError):
        await GeminiEmbedder(client, EMBED_MODEL, dim=8, **FAST).embed(["a"])
    assert len(fake.calls()) == 1


def test_make_client_needs_a_key() -> None:
    with pytest.raises(ValueError, match="API key"):
        make_client("")


async def test_source_messages_are_asked_for_and_invalid_indexes_dropped(
    fake: FakeGemini, client: genai.Client
) -> None:
    def responder(body: dict[str, Any], model: str) -> dict[str, Any]:
        text = body["contents"][0]["parts"][0]["text"]
        if "[0] user" in text:  # the first window shows messages 0 and 1
            return {"facts": [{**TABS, "source_messages": [0, 0, "1", 2, -1, True, "x", 99]},
                              {**STACK, "source_messages": "not a list"}]}
        return {"facts": [{**TABS, "source_messages": [2, 1]}]}  # 1 is in the other window: dropped

    fake.respond_with(responder)
    msgs = conversation("I prefer tabs. " + "y" * 300, "Noted. " + "y" * 300, "Tabs, really. " + "y" * 300)
    ex = extractor(client, window_chars=700)
    assert [start for start, _ in ex.windows(msgs)] == [0, 2]

    result = await ex.extract(msgs, project_id="proj-1")

    tabs, stack = result.facts
    assert tabs.source_messages == [0, 1, 2]  # merged across windows
    assert stack.source_messages == []  # the model could not tell: an empty list
    assert result.dropped == 0  # bad indexes are dropped, not counted as dropped items
    first = fake.calls("generateContent")[0]
    assert "[0] user: I prefer tabs" in first.prompt and "[1] assistant: Noted." in first.prompt
    item_schema = first.body["generationConfig"]["responseSchema"]["properties"]["facts"]["items"]
    assert item_schema["properties"]["source_messages"]["type"] == "ARRAY"
    assert "source_messages" in first.system_instruction
