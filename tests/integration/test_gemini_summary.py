"""A session's summary by Gemini when a key is set: the real google-genai client against the local
fake of the Gemini API; the extractor's model, its fallback model when the first is unavailable, and the offline
extractive summary (with the reason) when no model answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from service.deps import Deps
from tests.conftest import unique
from tests.fakes.gemini_server import FakeGemini
from tests.integration.conftest import running_app, wait_task

PRIMARY, FALLBACK = "gemini-3-flash-preview", "gemini-2.5-flash"
SUMMARY = "The user plans a trip to Lisbon in May and raised the hotel budget from 60 to 80 dollars a night."
MESSAGES = [
    {"role": "user", "content": "I'm planning a trip to Lisbon in May."},
    {"role": "assistant", "content": "Great, what is your hotel budget?"},
    {"role": "user", "content": "At most 60 dollars a night. Actually, make that 80 dollars."},
]


def answer(body: dict[str, Any], _model: str) -> dict[str, Any]:
    """A summary for the summary prompt, no facts for the extraction prompt."""
    instruction = " ".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts", []))
    return {"summary": SUMMARY} if instruction.startswith("You summarise") else {"facts": []}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        server.respond_with(answer)
        yield server


@pytest.fixture(scope="module")
async def gemini_stack(fake: FakeGemini, tmp_path_factory: pytest.TempPathFactory
                       ) -> AsyncIterator[tuple[httpx.AsyncClient, Deps]]:
    async with running_app(tmp_path_factory.mktemp("gemini-summary"), google_api_key="test-key",
                           gemini_base_url=fake.base_url) as pair:
        yield pair


async def _session(client: httpx.AsyncClient) -> tuple[str, str]:
    user, session = unique("summary"), unique("trip")
    resp = await client.post("/v1/memories", json={"user_id": user, "session_id": session, "messages": MESSAGES})
    assert resp.status_code == 202, resp.text
    assert (await wait_task(client, resp.json()["task_id"], timeout=60))["status"] == "completed"
    return user, session


def _summary_calls(fake: FakeGemini) -> list[Any]:
    return [r for r in fake.calls("generateContent") if r.system_instruction.startswith("You summarise")]


async def test_summary_by_the_extractors_model(gemini_stack: tuple[httpx.AsyncClient, Deps],
                                               fake: FakeGemini) -> None:
    client, _ = gemini_stack
    user, session = await _session(client)
    fake.reset()
    fake.respond_with(answer)
    resp = await client.get(f"/v1/conversations/{session}/summary", params={"user_id": user, "sentences": 2})
    assert resp.status_code == 200, resp.text
    got = resp.json()
    assert (got["method"], got["model"], got["summary"]) == ("gemini", PRIMARY, SUMMARY)
    assert got["message_count"] == 3 and got["sentences"] == [] and got["fallback_reason"] is None
    [call] = _summary_calls(fake)
    assert call.model == PRIMARY and "at most 2 plain sentences" in call.system_instruction
    assert call.prompt == "Conversation:\n" + "\n".join(f"{m['role']}: {m['content']}" for m in MESSAGES)
    assert json.loads(json.dumps(call.body["generationConfig"]))["responseMimeType"] == "application/json"


async def test_fallback_model_then_the_offline_summary(gemini_stack: tuple[httpx.AsyncClient, Deps],
                                                       fake: FakeGemini) -> None:
    client, _ = gemini_stack
    user, session = await _session(client)
    fake.reset()
    fake.respond_with(answer)
    fake.script(PRIMARY, [503, 503, 503, 503])  # 1 + 3 retries: unavailable
    got = (await client.get(f"/v1/conversations/{session}/summary", params={"user_id": user})).json()
    assert (got["method"], got["model"], got["summary"]) == ("gemini", FALLBACK, SUMMARY)
    assert [c.model for c in _summary_calls(fake)] == [PRIMARY] * 4 + [FALLBACK]

    fake.reset()
    fake.respond_with(answer)
    fake.script(PRIMARY, ["malformed"])  # not a summary: no model answered usefully
    got = (await client.get(f"/v1/conversations/{session}/summary", params={"user_id": user})).json()
    assert got["method"] == "extractive" and got["model"] is None
    assert "returned no summary" in got["fallback_reason"]
    assert got["sentences"] and all(s["text"] in " ".join(m["content"] for m in MESSAGES) for s in got["sentences"])
