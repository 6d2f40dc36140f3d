"""The relevance floor (docs/retrieval.md "The relevance floor") end to end with the default local embedder: search
lists every result and marks those found only by meaning below the model's calibrated floor; a context with a query
lists only what the query finds above it, and says how many it left out as unrelated; with nothing related, the
context is empty and says so."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from service.core.embedding_models import DEFAULT_MODEL, MODELS
from service.search.context_format import NOTHING_RELATED
from tests.conftest import MODEL_CACHE, unique
from tests.integration.conftest import running_app, wait_task

SAID = [
    "fyi for future stuff, I live in Neovim, so skip the VS Code menus when you give me editor tips",
    "we run EKS 1.28 in eu-west-1",
    "our python repos are 4 spaces, black with line length 100",
    "my rotation is three 12-hour nights a week, usually wed to fri",
]


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    async with running_app(tmp_path_factory.mktemp("floor"), embedder="local", model_cache_dir=MODEL_CACHE) as pair:
        yield pair


async def _user(client: httpx.AsyncClient) -> str:
    user = unique("floor")
    for text in SAID:
        resp = await client.post("/v1/memories", json={"user_id": user, "messages": [
            {"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]})
        assert resp.status_code == 202, resp.text
        assert (await wait_task(client, resp.json()["task_id"], timeout=60))["status"] == "completed"
    return user


async def _search(client: httpx.AsyncClient, user: str, query: str) -> list[dict[str, Any]]:
    resp = await client.post("/v1/search", json={"query": query, "user_id": user, "limit": 10})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["results"])


async def test_search_marks_and_the_context_leaves_out_what_is_below_the_floor(app: Any) -> None:
    client, deps = app
    assert deps.settings.calibration.relevance == MODELS[DEFAULT_MODEL].calibration.relevance
    user = await _user(client)

    # an answer: above the floor; the rest of the user's memories come too, the unrelated ones marked
    found = await _search(client, user, "What editor do I use?")
    assert "Neovim" in found[0]["content"] and not found[0]["below_floor"]
    assert len(found) > 1 and any(r["below_floor"] for r in found)
    for r in found:
        if r["below_floor"]:
            dense = next(s["score"] for s in r["signals"] if s["retriever"] == "dense")
            assert dense < deps.settings.calibration.relevance
            assert not {s["retriever"] for s in r["signals"]} & {"lexical", "graph", "time"}

    ctx = (await client.get("/v1/context/global", params={"user_id": user, "query": "What editor do I use?"})).json()
    listed = [m["content"] for g in ctx["categories"] for m in g["memories"]]
    # e5-small-v2's floor keeps some unrelated lines (its cosines of unrelated texts reach 0.80); the night shifts
    # fall below it
    assert any("Neovim" in c for c in listed) and not any("12-hour nights" in c for c in listed)
    assert ctx["unrelated"] > 0 and ctx["total"] == len(listed) + ctx["restated"] + ctx["unrelated"]

    # nothing stored answers it: every result marked, an empty context that says so
    assert all(r["below_floor"] for r in await _search(client, user, "Which football team do I support?"))
    empty = await client.get("/v1/context/global", params={"user_id": user, "format": "markdown",
                                                           "query": "Which football team do I support?"})
    assert NOTHING_RELATED in empty.text and "- " not in empty.text
    # without a query, the context is the whole primer
    primer = (await client.get("/v1/context/global", params={"user_id": user})).json()
    assert primer["unrelated"] == 0 and len(primer["order"]) >= len(SAID)
