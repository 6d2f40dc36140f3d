"""Right the first time: an empty GOOGLE_API_KEY, which docker-compose.yml passes when no key is set
(`${GOOGLE_API_KEY:-}`), is no key. The app starts on the offline extractor, /health names the extractor the
start-up built, and a conversation goes through that extractor."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task


async def test_an_empty_gemini_key_starts_the_offline_extractor(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "")  # Settings reads the environment: this is what a container gets
    async with running_app(tmp_path) as (client, deps):
        assert deps.settings.gemini.api_key is None
        assert deps.extractor.name == "offline"
        resp = await client.get("/health")
        assert resp.status_code == 200, resp.text
        health = resp.json()
        assert health["status"] == "ok" and health["extractor"] == "offline"
        assert health["embedder"] == deps.embedder.name

        resp = await client.post("/v1/memories", json={
            "messages": [{"role": "user", "content": "In this project we use FastAPI and PostgreSQL."}],
            "user_id": unique("first"), "project_id": "shop-api"})
        assert resp.status_code == 202, resp.text
        done = await wait_task(client, resp.json()["task_id"])
        assert done["status"] == "completed", done
        assert done["result"]["extractor"] == health["extractor"]
        assert done["result"]["memories"]
