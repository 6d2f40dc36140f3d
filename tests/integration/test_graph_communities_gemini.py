"""Community summaries by Gemini: the real google-genai client against the local fake of the API writes
each community's summary from its members and facts; a call that fails keeps the offline summary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unique
from tests.fakes.gemini_server import FakeGemini
from tests.integration.conftest import running_app, wait_task


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def summary_of(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The fake's answer names the first entity of the prompt, so the test sees what the prompt held."""
    prompt = " ".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))
    first = prompt.split("ENTITIES\n- ", 1)[1].split(" (", 1)[0]
    return {"summary": f"A group around {first}; {prompt.count('knows')} facts of knowing."}


async def test_gemini_summarises_communities_and_a_failed_call_keeps_the_offline_one(
        tmp_path: Path, fake: FakeGemini) -> None:
    async with running_app(tmp_path, google_api_key="test-key", gemini_base_url=fake.base_url) as (client, deps):
        model = deps.settings.gemini.llm_model
        u = unique("gsum")
        for members in (["Alice", "Bob", "Carol"], ["Xavier", "Yan", "Zoe", "Walt"]):
            for i, a in enumerate(members):
                for b in members[i + 1:]:
                    resp = await client.post("/v1/graph/facts", json={"user_id": u, "subject": a, "predicate": "knows",
                                                                      "object": b})
                    assert resp.status_code == 202, resp.text
                    assert (await wait_task(client, resp.json()["task_id"], timeout=60))["status"] == "completed"
        fake.reset()
        fake.respond_with(summary_of)
        fake.script(model, [400])  # the first community's call is refused: it keeps its offline summary
        resp = await client.post("/v1/graph/communities/rebuild", json={"user_id": u})
        task = await wait_task(client, resp.json()["task_id"], timeout=60)
        assert task["status"] == "completed", task
        assert task["result"]["report"]["summarised"] == 1
        assert fake.models("generateContent") == [model, model]
        page = (await client.get("/v1/graph/communities", params={"user_id": u})).json()
        by_size = {c["size"]: c for c in page["items"]}
        big, small = by_size[4], by_size[3]  # the biggest is summarised first: the refused call
        assert big["summary_source"] == "offline" and big["summary"].endswith(": knows")
        assert small["summary_source"] == "gemini"
        assert small["summary"] == f"A group around {small['members'][0]['name']}; 3 facts of knowing."
        prompt = json.dumps(fake.calls("generateContent")[-1].body)
        assert "Alice knows Bob" in prompt and "Xavier" not in prompt  # only the community's own facts
