"""The model path names what a fact replaces (service/ai/llm/prompts.py REPLACES, validation.py `resolve_replaces`,
service/writepath/writes.py `_known`): the extraction prompt of each provider shows the user's stored memories the
conversation may change, labelled m1, m2, ...; the model answers per fact the labels it replaces; only labels it was
shown count (an invented one and another user's memory id are ignored), and an accepted one supersedes with history
kept, as the offline rules do. Through the real google-genai and openai clients against the local fake servers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import unique
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.conftest import running_app, wait_task

LABEL = re.compile(r"^\[(m\d+)\] (.*)$", re.MULTILINE)


def prompt_of(body: dict[str, Any]) -> str:
    """The user turn of an extraction request, whichever provider's shape it has."""
    openai = [str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user"]
    gemini = [str(p.get("text", "")) for c in body.get("contents", []) for p in c.get("parts", [])]
    return "\n".join(openai or gemini)


def fact(content: str, replaces: list[str] | None = None) -> dict[str, Any]:
    return {"content": content, "category": "personal_fact", "scope": "global", "entities": [], "relations": [],
            "valid_at": None, "source_messages": [0], "replaces": replaces or []}


class Model:
    """The fake model's answers: a fact per message it knows; for the move, the labels it is told to name."""

    def __init__(self) -> None:
        self.other_id = ""  # another user's memory id, which a confused model might name
        self.prompts: list[str] = []

    def __call__(self, body: dict[str, Any], _model: str) -> dict[str, Any]:
        prompt = prompt_of(body)
        self.prompts.append(prompt)
        if "moved to Porto" in prompt:
            lisbon = [label for label, line in LABEL.findall(prompt) if "Lisbon" in line]
            return {"facts": [fact("The user lives in Porto.", [*lisbon, "m99", self.other_id]),
                              fact("The user likes the beach.", [])]}
        if "Lisbon" in prompt:
            return {"facts": [fact("The user lives in Lisbon.")]}
        if "Berlin" in prompt:
            return {"facts": [fact("The user lives in Berlin.")]}
        return {"facts": []}


@pytest.fixture(params=["gemini", "openai"])
def provider(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    server: Any = FakeGemini() if request.param == "gemini" else FakeOpenAI()
    with server:
        yield request.param, server


def settings_of(name: str, server: Any) -> dict[str, Any]:
    if name == "gemini":
        return {"google_api_key": "test-key", "gemini_base_url": server.base_url}
    return {"llm_provider": "openai", "openai_base_url": server.base_url, "llm_model": "llama3.1:8b"}


async def say(client: httpx.AsyncClient, user: str, text: str) -> dict[str, Any]:
    resp = await client.post("/v1/memories", json={"user_id": user, "messages": [{"role": "user", "content": text}]})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"], timeout=60)
    assert done["status"] == "completed", done
    return done


def memory_of(done: dict[str, Any], content: str) -> str:
    return next(str(m["id"]) for m in done["result"]["memories"] if m["content"] == content)


async def test_the_model_names_what_a_fact_replaces_and_only_shown_labels_count(
        tmp_path: Path, provider: tuple[str, Any]) -> None:
    name, server = provider
    model = Model()
    server.respond_with(model)
    async with running_app(tmp_path, **settings_of(name, server)) as (client, deps):
        other, user = unique("other"), unique("mover")
        model.other_id = memory_of(await say(client, other, "I live in Berlin."), "The user lives in Berlin.")
        lisbon = memory_of(await say(client, user, "I live in Lisbon, near the river."), "The user lives in Lisbon.")
        moved = await say(client, user, "Big news: we moved to Porto last weekend!")
        porto = memory_of(moved, "The user lives in Porto.")
        beach = memory_of(moved, "The user likes the beach.")

        # the prompt showed this user's memory, labelled, and nothing of the other user's
        prompt = next(p for p in model.prompts if "moved to Porto" in p)
        assert "Known memories" in prompt and any("Lisbon" in line for _, line in LABEL.findall(prompt))
        assert "Berlin" not in prompt

        stored = {m.id: m for m in await deps.vectors.get([lisbon, porto, beach, model.other_id])}
        assert stored[lisbon].superseded_by == porto  # the shown label: replaced, kept as history
        assert stored[model.other_id].superseded_by is None  # another user's id: ignored
        assert stored[porto].superseded_by is None and stored[beach].superseded_by is None  # "none" replaces nothing
        search = (await client.post("/v1/search", json={"query": "where do I live?", "user_id": user})).json()
        assert all(r["id"] != lisbon for r in search["results"])
        context = (await client.get("/v1/context/global", params={"user_id": user, "format": "markdown"})).text
        assert "The user lives in Lisbon. (said " in context and "The user lives in Porto." in context
        assert context.index("Lisbon") < context.index("Porto") and ", current)" in context
