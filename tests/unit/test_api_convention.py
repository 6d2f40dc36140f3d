"""The API convention of docs/api.md, kept by walking the OpenAPI: every route added later (by anyone) is held to it.

- every list answers `{items, next_cursor}` and takes `limit` (default DEFAULT_PAGE_SIZE) and `cursor`, except the
  seed's shapes (SEED_SHAPES);
- every error a route documents has the one error body; each route documents the errors every route can give (400
  Host check, 413 body limit), 422 when it takes input, the key's errors unless it is public, 404 when it names a
  resource by id, 409 where a conflict is possible;
- every state-changing route takes `Idempotency-Key`;
- one product name.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.api.errors import COMMON, GUARDED
from service.api.security import PUBLIC_PATHS
from service.app import PRODUCT_TITLE, create_app
from service.core.auth import READ_POSTS
from service.core.settings import Settings
from service.mcp.server import SERVER_NAME
from service.memory.health import SERVICE_NAME
from service.schemas.page import DEFAULT_PAGE_SIZE, SEED_SHAPES

WRITES = {"post", "put", "delete", "patch"}
BY_ID = {"task_id", "memory_id", "run_id", "trace_id", "session_id", "entity_id"}  # a named resource: 404
CONFLICTS = {("POST", "/v1/graph/duplicates/review"), ("POST", "/v1/graph/entities/merge"),
             ("POST", "/v1/graph/entities/{entity_id}/unmerge")}
OWN_ERROR_BODY = {("GET", "/health", "503")}  # /health answers its checks when degraded


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    out: dict[str, Any] = create_app(Settings(_env_file=None, log_level="WARNING")).openapi()  # type: ignore[call-arg]
    return out


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in schema["paths"].items() for method, op in ops.items()]


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def ok_schema(schema: dict[str, Any], op: dict[str, Any]) -> dict[str, Any] | None:
    for status in ("200", "201"):
        content = op["responses"].get(status, {}).get("content", {}).get("application/json")
        if content and content.get("schema"):
            return resolve(schema, content["schema"])
    return None


def params(op: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in op.get("parameters", [])}


def is_read_post(path: str) -> bool:
    return path in READ_POSTS or path.endswith("/search")


def body_fields(schema: dict[str, Any], op: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A POST read's paging fields live in its JSON body."""
    content = op.get("requestBody", {}).get("content", {}).get("application/json")
    if not content:
        return {}
    return {name: {"schema": field} for name, field in resolve(schema, content["schema"]).get("properties", {}).items()}


def test_every_list_is_items_and_next_cursor(schema: dict[str, Any]) -> None:
    lists = 0
    for method, path, op in operations(schema):
        body = ok_schema(schema, op)
        named = params(op) | (body_fields(schema, op) if method == "post" and is_read_post(path) else {})
        paged = method == "get" and ("cursor" in named or "limit" in named)
        is_list = paged or (body is not None and (body.get("type") == "array" or "next_cursor" in
                                                   body.get("properties", {})))
        if not is_list or (method.upper(), path) in SEED_SHAPES:
            continue
        lists += 1
        assert body is not None and body.get("type") == "object", f"{method} {path}: a list answers an object"
        props = body.get("properties", {})
        assert props.get("items", {}).get("type") == "array", f"{method} {path}: a list's entries are `items`"
        assert "next_cursor" in props, f"{method} {path}: a list has `next_cursor`"
        assert "cursor" in named and "limit" in named, f"{method} {path}: a list takes `cursor` and `limit`"
        default = named["limit"]["schema"].get("default")
        assert default == DEFAULT_PAGE_SIZE, f"{method} {path}: default page size {default}, not {DEFAULT_PAGE_SIZE}"
    assert lists >= 8  # the walk found the lists (memories aside): graph, traces, runs, sessions, messages, ...


def test_seed_shapes_are_routes(schema: dict[str, Any]) -> None:
    routes = {(m.upper(), p) for m, p, _ in operations(schema)}
    assert set(SEED_SHAPES) <= routes
    memories = ok_schema(schema, schema["paths"]["/v1/memories"]["get"])
    assert memories is not None and {"memories", "next_cursor", "status"} <= set(memories["properties"])


def test_every_error_has_the_one_body_and_each_route_names_its_errors(schema: dict[str, Any]) -> None:
    for method, path, op in operations(schema):
        answers = op["responses"]
        errors = {int(s) for s in answers if s.isdigit() and int(s) >= 400}
        wanted = set(COMMON) | (set() if path in PUBLIC_PATHS else set(GUARDED))
        if op.get("parameters") or op.get("requestBody"):
            wanted.add(422)
        if BY_ID & {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}:
            wanted.add(404)
        if (method.upper(), path) in CONFLICTS:
            wanted.add(409)
        assert wanted <= errors, f"{method} {path}: missing {sorted(wanted - errors)}"
        for status in errors:
            if (method.upper(), path, str(status)) in OWN_ERROR_BODY:
                continue
            ref = answers[str(status)]["content"]["application/json"]["schema"]["$ref"]
            assert ref == "#/components/schemas/ErrorBody", f"{method} {path} {status}: {ref}"
    body = schema["components"]["schemas"]["ErrorBody"]
    assert body["required"] == ["detail", "code"] and "errors" in body["properties"]
    assert "HTTPValidationError" not in schema["components"]["schemas"]


def test_every_state_changing_route_takes_an_idempotency_key(schema: dict[str, Any]) -> None:
    for method, path, op in operations(schema):
        if method not in WRITES or (method == "post" and is_read_post(path)):
            continue
        assert "Idempotency-Key" in params(op), f"{method} {path}: no Idempotency-Key"


def test_tasks_route_and_optimize_is_a_task(schema: dict[str, Any]) -> None:
    assert "404" in schema["paths"]["/v1/tasks/{task_id}"]["get"]["responses"]
    assert "202" in schema["paths"]["/v1/maintenance/optimize"]["post"]["responses"]


def test_one_product_name() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert SERVICE_NAME == SERVER_NAME == "memory-platform"
    assert settings.redis.queue_name.startswith("memory-platform:")
    assert settings.qdrant.collection == "memory_platform"
    assert PRODUCT_TITLE.startswith("Memory platform")
