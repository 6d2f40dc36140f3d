"""Prometheus metrics at /metrics: the write, job, stage and search figures, guarded under AUTH_MODE=keys."""

from __future__ import annotations

from pathlib import Path

from service.auth import ApiKeyStore
from tests.conftest import unique
from tests.integration.conftest import running_app


async def test_metrics_are_exposed_and_guarded(tmp_path: Path) -> None:
    async with running_app(tmp_path, auth_mode="keys", metrics_token="scrape-token-123") as (client, deps):
        store = ApiKeyStore(deps.redis, deps.settings)
        user_key = (await store.create(unique("mu")))[1]
        admin_key = (await store.create("ops", admin=True))[1]
        user = {"Authorization": f"Bearer {user_key}"}
        resp = await client.post("/v1/memories/raw", json={"content": "I use Grafana", "category": "preference"},
                                 headers=user)
        task = resp.json()["task_id"]
        for _ in range(400):
            status = (await client.get(f"/v1/memories/status/{task}", headers=user)).json()
            if status["status"] == "completed":
                break
        assert status["status"] == "completed"
        assert (await client.post("/v1/search", json={"query": "Grafana"}, headers=user)).status_code == 200

        assert (await client.get("/metrics")).status_code == 401
        assert (await client.get("/metrics", headers=user)).status_code == 403
        by_token = await client.get("/metrics", headers={"Authorization": "Bearer scrape-token-123"})
        assert by_token.status_code == 200
        text = (await client.get("/metrics", headers={"Authorization": f"Bearer {admin_key}"})).text
        for name in ("http_request_duration_seconds_bucket", "memory_queue_depth", "memory_queue_oldest_age_seconds",
                     "memory_outbox_depth", "memory_jobs_total", "memory_job_duration_seconds",
                     "memory_job_stage_seconds", "memory_search_duration_seconds"):
            assert name in text, name
        assert 'memory_jobs_total{kind="raw",outcome="completed"}' in text
        assert 'route="/v1/memories/status/{task_id}"' in text  # templates, never ids
        assert task not in text and "mu-" not in text
        assert 'retriever="graph"' in text and 'stage="embed"' in text
