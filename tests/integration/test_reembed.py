"""Changing the embedder: a store written by another model is refused at start, naming the command that
re-embeds; with ALLOW_EMBEDDER_CHANGE the service starts, search keeps finding the memories, and `reembed` (the
API route here, the CLI in tests/integration/test_cli.py) gives every memory the new model's vector once, after
which the store records the new embedder."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest

from service.core.errors import StoreConfigError
from service.maintenance.reembed import Reembedder, submit_reembed
from service.stores.vector import MemoryFilter
from service.tasks.jobs import ReembedJob
from tests.conftest import MODEL_CACHE, local_embedder, unique
from tests.integration.conftest import running_app, wait_task

FACTS = [
    "I prefer a dark theme in every editor",
    "My dog Max loves the beach near Lisbon",
    "The project deploys with Argo CD to Kubernetes",
    "We decided to ship the beta on Friday",
    "Caroline plays the violin in a community orchestra",
    "The invoice from the accountant is due next Tuesday",
]


async def _write(client: httpx.AsyncClient, user: str) -> list[str]:
    ids = []
    for fact in FACTS:
        resp = await client.post("/v1/memories/raw", json={"content": fact, "user_id": user,
                                                            "category": "personal_fact"})
        assert resp.status_code == 202, resp.text
        task = await wait_task(client, resp.json()["task_id"])
        assert task["status"] == "completed", task
        ids += [m["id"] for m in task["result"]["memories"]]
    return ids


async def _found(client: httpx.AsyncClient, user: str, query: str) -> list[str]:
    resp = await client.post("/v1/search", json={"query": query, "user_id": user, "limit": 3})
    assert resp.status_code == 200, resp.text
    return [r["content"] for r in resp.json()["results"]]


async def test_a_minilm_store_is_refused_under_e5_then_reembedded(tmp_path: Path) -> None:
    """The upgrade of a store written by the earlier default model (all-MiniLM-L6-v2) to e5-small-v2."""
    user = unique("reembed")
    minilm = {"embedder": "local", "embedder_model": "all-MiniLM-L6-v2", "model_cache_dir": MODEL_CACHE}
    async with running_app(tmp_path, **minilm) as (client, _):
        ids = await _write(client, user)
        assert FACTS[1] in await _found(client, user, "dog beach Lisbon")

    e5 = {"embedder": "local", "model_cache_dir": MODEL_CACHE}  # the default model, also 384-d
    with pytest.raises(StoreConfigError) as refused:
        async with running_app(tmp_path, **e5):
            pass
    message = str(refused.value)
    assert "all-MiniLM-L6-v2" in message and "e5-small-v2" in message
    assert "python -m service reembed" in message and "ALLOW_EMBEDDER_CHANGE=true" in message

    async with running_app(tmp_path, allow_embedder_change=True, **e5) as (client, deps):
        recorded = await deps.vectors.recorded_embedder()
        assert recorded["embedder"] == "all-MiniLM-L6-v2"
        assert recorded["reembed_to"] == {"embedder": "e5-small-v2", "variant": "onnx-int8"}

        resp = await client.post("/v1/maintenance/reembed", json={})
        assert resp.status_code == 202, resp.text
        task = await wait_task(client, resp.json()["task_id"], timeout=120)
        assert task["status"] == "completed", task
        result = task["result"]
        assert result["finished"] is True and result["reembedded"] == len(ids) == result["total"]
        assert task["progress"]["done"] == result["reembedded"]

        page, _ = await deps.vectors.scroll_vectors(MemoryFilter(user_id=user, all_scopes=True), 100)
        stored = {r.memory.id: r.vector for r in page}
        assert set(stored) == set(ids)
        contents = {r.memory.id: r.memory.content for r in page}
        fresh = local_embedder().encode_array([contents[i] for i in ids])  # e5's passage vectors
        for row, memory_id in zip(fresh, ids, strict=True):  # every vector is now the new model's
            assert float(np.dot(row, np.array(stored[memory_id]))) > 0.9999
        now = await deps.vectors.recorded_embedder()
        assert (now["embedder"], now["dim"], now["variant"]) == ("e5-small-v2", 384, "onnx-int8")
        assert not now.get("reembed_to")
        # a meaning-only query (no shared words) finds it through the new model's vectors
        assert FACTS[0] in await _found(client, user, "which colour scheme do they like for coding")

    async with running_app(tmp_path, **e5) as (client, _):  # the store is the new model's now: no refusal
        assert FACTS[3] in await _found(client, user, "beta release day")


async def test_a_store_without_the_model_files_stops_with_one_line(tmp_path: Path) -> None:
    """A pip-only install that never fetched the default model: the start is refused with one line naming the
    fetch command (nothing is downloaded while serving)."""
    from service.ai.local import EmbedderConfigError

    with pytest.raises(EmbedderConfigError) as refused:
        async with running_app(tmp_path, embedder="local", model_cache_dir=tmp_path / "empty-cache"):
            pass
    message = str(refused.value)
    assert "\n" not in message and "python -m service models fetch" in message and "e5-small-v2" in message


async def test_a_run_goes_on_in_parts_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    """Each part re-embeds one page and queues the next (no worker here: the test runs each queued part); every
    memory is re-embedded once over the parts, and asking again while a part is queued answers that part."""
    user = unique("reembed-parts")
    async with running_app(tmp_path) as (client, _):
        ids = await _write(client, user)
    async with running_app(tmp_path, embedded_worker=False) as (_, deps):
        parts = Reembedder(deps.settings.redis, deps.tasks, deps.vectors, deps.embedder, deps.locks,
                           deps.ledger, page=2, budget_s=0)
        async def submit() -> str:
            return await submit_reembed(deps.tasks, deps.kv, deps.embedder, user)

        task_id = await submit()
        assert await submit() == task_id  # asked again before it started: the same task
        results = []
        for _ in range(len(ids) + 2):  # bounded: one page of 2 per part
            result = await parts.run(task_id, ReembedJob(user_id=user))
            results.append(result)
            if result["finished"]:
                break
            assert await submit() == result["next_task_id"]  # the queued part, not a new run
            task_id = result["next_task_id"]
        assert results[-1]["finished"] and results[-1]["reembedded"] == len(ids) == results[-1]["total"]
        assert [r["reembedded"] for r in results] == sorted(r["reembedded"] for r in results)
        assert len(results) >= len(ids) // 2 and results[0]["reembedded"] == 2
        status = await deps.tasks.records.status(results[0]["next_task_id"])
        assert status.status.value == "queued"
