"""Input rules (docs/api.md: errors): 400 domain errors, 413 oversize, 422 schema errors."""

from __future__ import annotations

import httpx
import pytest

from service.core.domain import CATEGORIES
from tests.conftest import unique
from tests.integration.conftest import wait_task


async def test_unknown_category_names_the_valid_ones(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/memories/raw", json={"content": "x", "user_id": "u", "category": "gossip"})
    assert resp.status_code == 400
    detail = resp.json()["detail"]
    assert "gossip" in detail
    assert all(name in detail for name in CATEGORIES)


@pytest.mark.parametrize("body", [
    {"scope": "project", "category": "preference"},
    {"category": "tech_stack"},  # defaults to project scope
])
async def test_project_scope_needs_project_id(client: httpx.AsyncClient, body: dict[str, str]) -> None:
    resp = await client.post("/v1/memories/raw", json={"content": "x", "user_id": unique("u"), **body})
    assert resp.status_code == 400
    assert "project_id" in resp.json()["detail"]


async def test_empty_and_oversize_content(client: httpx.AsyncClient) -> None:
    empty = await client.post("/v1/memories/raw", json={"content": "  \n ", "user_id": "u", "category": "preference"})
    assert empty.status_code == 400
    assert "empty" in empty.json()["detail"]
    big = await client.post("/v1/memories/raw", json={"content": "a" * 8001, "user_id": "u", "category": "preference"})
    assert big.status_code == 413
    assert "8000" in big.json()["detail"]
    ok = await client.post("/v1/memories/raw", json={"content": "a" * 8000, "user_id": unique("u"),
                                                     "category": "preference"})
    assert ok.status_code == 202


@pytest.mark.parametrize("body", [
    {"content": "x", "user_id": "", "category": "preference"},
    {"content": "x", "user_id": "a b", "category": "preference"},  # bad id characters
    {"content": "x", "user_id": "u", "category": "preference", "scope": "team"},
    {"content": "x", "user_id": "u", "category": "preference", "surprise": 1},
])
async def test_schema_errors_are_422(client: httpx.AsyncClient, body: dict[str, object]) -> None:
    # (a missing user_id: a user API key names the user; without a key it is DEFAULT_USER_ID,
    # test_missing_user_id_without_a_key_is_the_default_user; an admin key naming none is 422, test_auth)
    resp = await client.post("/v1/memories/raw", json=body)
    assert resp.status_code == 422, resp.text


@pytest.mark.parametrize("content_type", [None, "application/x-www-form-urlencoded", "text/plain"])
async def test_a_json_body_without_its_content_type_is_a_422_that_names_it(
    client: httpx.AsyncClient, content_type: str | None
) -> None:
    """What curl -d sends without -H 'Content-Type: application/json': the answer says which header is missing."""
    body = b'{"content": "x", "user_id": "u", "category": "preference"}'
    headers = {"content-type": content_type} if content_type else {}
    resp = await client.post("/v1/memories/raw", content=body, headers=headers)
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert "Content-Type: application/json" in detail and f"Content-Type: {content_type or 'none'})" in detail
    bad_json = await client.post("/v1/memories/raw", json={"content": 1, "user_id": "u", "category": "preference"})
    assert bad_json.status_code == 422 and "Content-Type" not in bad_json.json()["detail"]


async def test_search_rejects_unknown_category(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/search", json={"query": "q", "user_id": "u", "categories": ["nope"]})
    assert resp.status_code == 400
    assert "nope" in resp.json()["detail"]


async def test_categories_endpoint(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/categories")
    assert resp.status_code == 200
    cats = {c["name"]: c for c in resp.json()}
    assert len(cats) == 13
    assert cats["preference"] == {**cats["preference"], "group": "semantic", "default_scope": "global"}
    assert cats["convention"]["group"] == "project" and cats["convention"]["default_scope"] == "project"
    assert cats["decision"]["default_scope"] == "flexible"
    assert cats["task_context"]["group"] == "working"
    assert {c["group"] for c in cats.values()} == {"semantic", "project", "episodic", "procedural", "working"}


async def test_health_ok(client: httpx.AsyncClient) -> None:
    resp = await client.get("/health")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "ok"
    assert body["checks"] == {"redis": "ok", "vector_store": "ok", "graph_store": "ok", "event_loop": "ok",
                              "queue": "ok"}
    assert body["down"] == []
    assert resp.headers["x-request-id"]


async def test_missing_user_id_without_a_key_is_the_default_user(client: httpx.AsyncClient) -> None:
    """AUTH_MODE=none (a laptop): a request naming no user acts for DEFAULT_USER_ID."""
    content = f"default user fact {unique('d')}"
    resp = await client.post("/v1/memories/raw", json={"content": content, "category": "preference"})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed"
    listed = await client.get("/v1/memories", params={"user_id": "default_user", "limit": 500})
    assert content in [m["content"] for m in listed.json()["memories"]]


async def test_invalid_json_says_what_is_wrong_and_where(client: httpx.AsyncClient) -> None:
    body = b'{"content": "x",\n "user_id": "u" "category": "preference"}'
    resp = await client.post("/v1/memories/raw", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert detail == "body: invalid JSON: expecting ',' delimiter at line 2, column 17", detail
    assert resp.json()["errors"] == [{"loc": ["body"], "type": "json_invalid",
                                      "msg": "invalid JSON: expecting ',' delimiter at line 2, column 17"}]


@pytest.mark.parametrize("where", ["body", "query"])
async def test_a_bad_id_says_its_rule_in_words(client: httpx.AsyncClient, where: str) -> None:
    if where == "body":
        resp = await client.post("/v1/memories/raw", json={"content": "x", "user_id": "a b!", "category": "preference"})
    else:
        resp = await client.get("/v1/memories", params={"user_id": "a b!"})
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert "user_id: must be 1 to 128 letters, digits or _ . : @ -, starting with a letter or digit" in detail
    assert "[A-Za-z" not in resp.text and "^" not in detail
