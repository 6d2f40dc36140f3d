"""Pin the public API: a route added, removed or renamed must show up here on purpose."""

from __future__ import annotations

from service.app import create_app
from service.core.settings import Settings

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
