"""The API convention at work (docs/api.md): the one error body for every kind of error, task polling at
/v1/tasks/{id} for every kind, optimize as a task, Idempotency-Key on the synchronous state-changing routes, the
list shape of the maintenance runs."""

from __future__ import annotations

from typing import Any

import httpx

from service.schemas.memories import MAX_METADATA_VALUE_CHARS
from tests.conftest import unique
from tests.integration.conftest import wait_task


def _error(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = resp.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["code"] == code, body
    return body


async def test_every_kind_of_error_has_the_one_body(client: httpx.AsyncClient) -> None:
    user = unique("err")
    # a domain rule (400), a schema error (422 with the fields), a missing field (422), an unknown id (404)
    domain = _error(await client.post("/v1/memories/raw", json={"content": "x", "user_id": user,
                                                                  "category": "gossip"}), 400, "invalid_request")
    assert "gossip" in domain["detail"]
    schema = _error(await client.post("/v1/memories/raw", json={"content": "x", "user_id": user,
                                                                  "category": "preference", "scope": "team"}),
                    422, "validation_error")
    assert schema["errors"][0]["loc"] == ["body", "scope"] and "body.scope" in schema["detail"]
    missing = _error(await client.post("/v1/memories/raw", json={"user_id": user, "category": "preference"}),
                     422, "validation_error")
    assert missing["errors"][0]["loc"] == ["body", "content"] and missing["errors"][0]["type"] == "missing"
    _error(await client.get("/v1/memories/0123456789abcdef", params={"user_id": user}), 404, "not_found")
    _error(await client.get("/v1/tasks/unknown-task"), 404, "not_found")
    # an unknown path and a wrong method: Starlette's own errors, the same body
    _error(await client.get("/v1/nothing-here"), 404, "not_found")
    _error(await client.patch("/v1/search", json={}), 405, "method_not_allowed")
    # size limits are 413 wherever they apply: content, a metadata value, the body
    _error(await client.post("/v1/memories/raw", json={"content": "a" * 8001, "user_id": user,
                                                         "category": "preference"}), 413, "payload_too_large")
    meta = _error(await client.post("/v1/memories/raw", json={
        "content": "x", "user_id": user, "category": "preference",
        "metadata": {"note": "v" * (MAX_METADATA_VALUE_CHARS + 1)}}), 413, "payload_too_large")
    assert meta["errors"][0]["type"] == "too_large" and str(MAX_METADATA_VALUE_CHARS) in meta["detail"]
    _error(await client.post("/v1/memories/raw", content=b"{" + b" " * (2 * 1024 * 1024) + b"}",
                             headers={"content-type": "application/json"}), 413, "payload_too_large")
    # the Host check
    _error(await client.get("/health", headers={"host": "attacker.example"}), 400, "invalid_host")


async def test_every_task_kind_is_polled_at_v1_tasks(client: httpx.AsyncClient) -> None:
    user = unique("tasks")
    write = await client.post("/v1/memories/raw", json={"content": "I like green tea", "user_id": user,
                                                         "category": "preference"})
    assert write.json()["poll_url"] == f"/v1/memories/status/{write.json()['task_id']}"  # the seed's, kept
    done = await wait_task(client, write.json()["task_id"])
    same = await client.get(f"/v1/tasks/{write.json()['task_id']}")
    assert same.status_code == 200 and same.json() == {k: v for k, v in done.items() if k != "_seen"}
    # a maintenance run's task: its poll_url is /v1/tasks/
    run = await client.post("/v1/maintenance/reconcile", json={"user_id": user, "dry_run": True})
    assert run.status_code == 202 and run.json()["poll_url"] == f"/v1/tasks/{run.json()['task_id']}"
    # optimize is a task like the others: 202, then the build's report as the task's result
    opt = await client.post("/v1/maintenance/optimize")
    assert opt.status_code == 202, opt.text
    assert opt.json()["poll_url"] == f"/v1/tasks/{opt.json()['task_id']}"
    built = await wait_task(client, opt.json()["task_id"], timeout=120)
    assert built["status"] == "completed", built
    assert built["result"]["backend"] == "qdrant_edge" and built["result"]["backlog_after"] <= \
        built["result"]["backlog_before"]


async def test_maintenance_runs_are_a_page_of_items(client: httpx.AsyncClient) -> None:
    user = unique("pages")
    ids = []
    for _ in range(3):
        run = await client.post("/v1/maintenance/dedup", json={"user_id": user, "dry_run": True})
        ids.append(run.json()["run_id"])
    seen: list[str] = []
    cursor = None
    for _ in range(400):  # bounded: the newest 500 runs, two at a time
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/maintenance/runs", params=params)).json()
        assert set(page) == {"items", "next_cursor"} and len(page["items"]) <= 2
        seen += [r["run_id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if not cursor or set(ids) <= set(seen):
            break
    assert set(ids) <= set(seen) and len(seen) == len(set(seen))  # every run once, newest first
    assert [i for i in seen if i in ids] == ids[::-1]


async def test_idempotency_key_on_a_merge_answers_the_first_result(client: httpx.AsyncClient) -> None:
    user = unique("merge")
    key = {"Idempotency-Key": unique("idem")}
    body = {"user_id": user, "source_id": "nope-a", "target_id": "nope-b"}
    first = await client.post("/v1/graph/entities/merge", json=body, headers=key)
    _error(first, 404, "not_found")  # an error is not kept: a retry runs again
    again = await client.post("/v1/graph/entities/merge", json=body, headers=key)
    _error(again, 404, "not_found")
    # a maintenance run retried with its key is the same run; another body with the key is refused
    run_key = {"Idempotency-Key": unique("idem")}
    run = await client.post("/v1/maintenance/dedup", json={"user_id": user, "dry_run": True}, headers=run_key)
    retried = await client.post("/v1/maintenance/dedup", json={"user_id": user, "dry_run": True}, headers=run_key)
    assert run.status_code == retried.status_code == 202 and run.json() == retried.json()
    other = await client.post("/v1/maintenance/dedup", json={"user_id": user}, headers=run_key)
    _error(other, 422, "idempotency_key_reused")
    fresh = await client.post("/v1/maintenance/dedup", json={"user_id": user, "dry_run": True})
    assert fresh.json()["run_id"] != run.json()["run_id"]  # without the key every request is a new run
