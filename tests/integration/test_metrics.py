"""Prometheus metrics at /metrics: the write, job, stage and search figures, guarded under AUTH_MODE=keys."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from service.core.auth import ApiKeyStore
from service.tasks.jobs import RawJob
from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task


async def test_metrics_are_exposed_and_guarded(tmp_path: Path) -> None:
    async with running_app(tmp_path, auth_mode="keys", metrics_token="scrape-token-123") as (client, deps):
        store = ApiKeyStore(deps.redis, deps.settings.redis)
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


async def test_counters_move_by_the_right_amounts(tmp_path: Path) -> None:
    async with running_app(tmp_path) as (client, deps):
        def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            return {(s.name, tuple(sorted(s.labels.items()))): s.value
                    for family in text_string_to_metric_families(text) for s in family.samples}

        def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
            return name, tuple(sorted(labels.items()))

        before = scrape((await client.get("/metrics")).text)
        user = unique("mc")
        ok = await client.post("/v1/memories/raw", json={"content": "I use Loki", "user_id": user,
                                                         "category": "preference"})
        assert (await wait_task(client, ok.json()["task_id"]))["status"] == "completed"
        bad = await deps.tasks.enqueue(RawJob(user_id=user, scope="galactic", category="preference", content="x"),
                                       {"probe": unique("p")})
        assert (await wait_task(client, bad))["status"] == "failed"
        assert (await client.post("/v1/search", json={"query": "Loki", "user_id": user})).status_code == 200
        after = scrape((await client.get("/metrics")).text)

        def moved(k: tuple[str, tuple[tuple[str, str], ...]]) -> float:
            return after.get(k, 0.0) - before.get(k, 0.0)

        assert moved(key("memory_jobs_total", kind="raw", outcome="completed")) == 1
        assert moved(key("memory_jobs_total", kind="raw", outcome="failed")) == 1
        assert moved(key("memory_search_duration_seconds_count", retriever="fused")) == 1
        for retriever in ("dense", "lexical", "graph"):
            assert moved(key("memory_search_duration_seconds_count", retriever=retriever)) == 1
        assert moved(key("http_request_duration_seconds_count", route="/v1/search", method="POST", status="200")) == 1
        assert moved(key("memory_job_stage_seconds_count", stage="embed")) == 1
        for (name, labels) in after:
            assert all(user not in v and ok.json()["task_id"] not in v for _, v in labels), (name, labels)
