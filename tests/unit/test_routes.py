"""Pin the public API: a route added, removed or renamed must show up here on purpose. And each route is declared
once (service/routes.py): the app serves exactly the declarations, the client and the MCP operations build their
requests from them and write no path of their own."""

from __future__ import annotations

import ast
import types
import typing
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from service import routes
from service.app import create_app
from service.core.settings import Settings
from service.mcp import operations
from service.routes import ROUTES, Route

ROOT = Path(__file__).resolve().parents[2]

PUBLIC_ROUTES = {
    ("POST", "/v1/memories"),
    ("POST", "/v1/memories/raw"),
    ("POST", "/v1/memories/raw/batch"),
    ("GET", "/v1/memories/status/{task_id}"),
    ("GET", "/v1/memories"),
    ("POST", "/v1/memories/delete"),
    ("GET", "/v1/memories/{memory_id}"),
    ("PUT", "/v1/memories/{memory_id}"),
    ("DELETE", "/v1/memories/{memory_id}"),
    ("POST", "/v1/search"),
    ("POST", "/v1/graph/search"),
    ("GET", "/v1/graph/nodes"),
    ("GET", "/v1/graph/edges"),
    ("GET", "/v1/graph/episodes"),
    ("GET", "/v1/graph/stats"),
    ("GET", "/v1/graph/duplicates"),
    ("POST", "/v1/graph/duplicates/review"),
    ("POST", "/v1/graph/entities/merge"),
    ("POST", "/v1/graph/entities/{entity_id}/unmerge"),
    ("GET", "/v1/traces"),
    ("GET", "/v1/traces/{trace_id}"),
    ("GET", "/v1/context/global"),
    ("GET", "/v1/context/{project_id}"),
    ("GET", "/v1/categories"),
    ("GET", "/health"),
    ("GET", "/metrics"),
    ("POST", "/v1/maintenance/dedup"),
    ("POST", "/v1/maintenance/reconcile"),
    ("POST", "/v1/maintenance/optimize"),
    ("POST", "/v1/maintenance/reembed"),
    ("GET", "/v1/export"),
    ("POST", "/v1/import"),
    ("POST", "/memories/async"),
    ("GET", "/memories/status/{task_id}"),
    ("GET", "/v1/maintenance/runs"),
    ("GET", "/v1/maintenance/runs/{run_id}"),
    # task traces and conversations
    ("POST", "/v1/runs"),
    ("GET", "/v1/runs"),
    ("POST", "/v1/runs/search"),
    ("GET", "/v1/runs/stats"),
    ("GET", "/v1/runs/{run_id}"),
    ("DELETE", "/v1/runs/{run_id}"),
    ("POST", "/v1/runs/{run_id}/steps"),
    ("POST", "/v1/runs/{run_id}/steps/{seq}/tool-calls"),
    ("POST", "/v1/runs/{run_id}/complete"),
    ("GET", "/v1/conversations"),
    ("POST", "/v1/conversations/search"),
    ("GET", "/v1/conversations/{session_id}"),
    ("GET", "/v1/conversations/{session_id}/summary"),
    ("DELETE", "/v1/conversations/{session_id}"),
    ("GET", "/v1/tasks/{task_id}"),  # task polling for every kind
    # the graph as an API
    ("POST", "/v1/graph/entities"),
    ("POST", "/v1/graph/relations"),
    ("POST", "/v1/graph/facts"),
    ("GET", "/v1/graph/facts"),
    ("GET", "/v1/graph/entities/{entity_id}/facts"),
    ("POST", "/v1/graph/query"),
    ("GET", "/v1/graph/communities"),
    ("POST", "/v1/graph/communities/rebuild"),
}


def test_public_routes_are_pinned() -> None:
    schema = create_app(Settings(_env_file=None, log_level="WARNING")).openapi()  # type: ignore[call-arg]
    routes = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    assert routes == PUBLIC_ROUTES


def test_openapi_schema_builds() -> None:
    schema = create_app(Settings(_env_file=None, log_level="WARNING")).openapi()  # type: ignore[call-arg]
    assert schema["paths"]["/v1/memories/raw"]["post"]["responses"]["202"]


def _app() -> FastAPI:
    return create_app(Settings(_env_file=None, log_level="WARNING"))  # type: ignore[call-arg]


def _served(app: FastAPI) -> list[APIRoute]:
    """The app's API routes (the console's pages are not in the schema)."""
    out: list[APIRoute] = []
    for mounted in app.router.routes:
        router = getattr(mounted, "original_router", None)  # an included router (FastAPI 0.16x)
        out += [r for r in getattr(router, "routes", []) if isinstance(r, APIRoute) and r.include_in_schema]
    return out


def _model(annotation: Any) -> Any:
    """`Model | None` -> Model."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return inner[0] if len(inner) == 1 else annotation
    return annotation


def test_the_app_serves_each_declared_route_as_declared() -> None:
    assert {(r.method, r.path) for r in ROUTES} == PUBLIC_ROUTES
    assert len(ROUTES) == len(PUBLIC_ROUTES)  # none declared twice
    declared: dict[tuple[str, str], Route[Any]] = {(r.method, r.path): r for r in ROUTES}
    served = _served(_app())
    assert len(served) == len(ROUTES)
    for api in served:
        (method,) = sorted(api.methods or ())
        route = declared[(method, api.path)]
        bodies = [_model(b.field_info.annotation) for b in api.dependant.body_params]
        assert (api.status_code or 200, api.response_model, bool(api.deprecated), bodies) == (
            route.status, route.answer, route.deprecated, [route.body] if route.body else []), f"{method} {api.path}"


def _strings_and_route_names(path: Path) -> tuple[list[str], set[str]]:
    tree = ast.parse(path.read_text(), str(path))
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    named = {n.attr for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "routes"}
    return strings, named


def test_the_client_and_the_mcp_operations_write_no_path_of_their_own() -> None:
    paths = {r.path.split("{")[0].rstrip("/") for r in ROUTES} - {""}
    for module in ("service/client/routes.py", "service/client/call.py", "service/client/sync.py",
                   "service/client/aio.py", "service/mcp/operations.py", "service/mcp/backend.py"):
        strings, _ = _strings_and_route_names(ROOT / module)
        written = [s for s in strings if any(s.startswith(p) for p in paths)]
        assert written == [], f"{module} writes paths: {written}"


def test_the_client_reaches_every_declared_route() -> None:
    _, named = _strings_and_route_names(ROOT / "service" / "client" / "routes.py")
    declared = {name for name, value in vars(routes).items() if isinstance(value, Route)}
    assert declared - named == set()


def test_each_mcp_operation_reads_the_answer_of_a_declared_route() -> None:
    ops = [v for v in vars(operations).values() if isinstance(v, operations.Operation)]
    assert len(ops) >= 20
    for op in ops:
        assert op.rest and all(r in ROUTES for r in op.rest)
        assert all(issubclass(r.answer, op.response) for r in op.rest), op


def test_a_declared_path_escapes_what_it_is_given() -> None:
    assert routes.GET_MEMORY.url(memory_id="a/b c") == "/v1/memories/a%2Fb%20c"
    assert routes.ADD_TOOL_CALL.params == ("run_id", "seq")
    assert routes.SEARCH.writes is False and routes.ADD_RAW.writes is True and routes.TASK.writes is False
