"""Task traces against the real stack: parts of a run written in any order read back in order,
a failed tool call is found by a later search naming its tool or its error, redaction, stats, erasure."""

from __future__ import annotations

import json
from typing import Any

import httpx

from service.deps import Deps
from tests.conftest import unique
from tests.integration.conftest import wait_task, write_raw


async def _done(client: httpx.AsyncClient, resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 202, resp.text
    body = await wait_task(client, resp.json()["task_id"])
    assert body["status"] == "completed", body
    return body


async def _start(client: httpx.AsyncClient, user: str, **body: Any) -> str:
    resp = await client.post("/v1/runs", json={"user_id": user, "session_id": "s1", **body})
    await _done(client, resp)
    run_id: str = resp.json()["run_id"]
    return run_id


async def test_parts_written_out_of_order_read_back_in_order(client: httpx.AsyncClient) -> None:
    user = unique("runs")
    run = await _start(client, user, task="Fix the flaky login test", project_id="webapp")
    base = f"/v1/runs/{run}"
    # the last step's tool call first, before its step; then the steps backwards; tool calls of step 1 backwards
    await _done(client, await client.post(f"{base}/steps/2/tool-calls", json={
        "user_id": user, "tool": "Bash", "arguments": {"command": "make test"}, "status": "ok", "result": "42 passed"}))
    for seq, action in ((2, "run the suite again"), (1, "read the test"), (0, "reproduce the failure")):
        await _done(client, await client.post(f"{base}/steps", json={"user_id": user, "seq": seq, "action": action}))
    for n in (3, 1, 2):
        await _done(client, await client.post(f"{base}/steps/1/tool-calls", json={
            "user_id": user, "seq": n, "tool": "Read", "arguments": {"path": f"tests/test_login_{n}.py"},
            "touched": [{"name": f"test_login_{n}.py", "type": "file"}]}))
    await _done(client, await client.post(f"{base}/complete", json={
        "user_id": user, "success": True, "summary": "The login test waited on a fixed sleep; now it polls."}))

    got = (await client.get(base, params={"user_id": user})).json()
    assert [s["seq"] for s in got["trace"]] == [0, 1, 2]
    assert [s["action"] for s in got["trace"]] == ["reproduce the failure", "read the test", "run the suite again"]
    assert [c["seq"] for c in got["trace"][1]["tool_calls"]] == [1, 2, 3]
    assert [c["touched"][0]["name"] for c in got["trace"][1]["tool_calls"]] == [
        "test_login_1.py", "test_login_2.py", "test_login_3.py"]
    assert got["trace"][2]["tool_calls"][0]["tool"] == "Bash"
    assert json.loads(got["trace"][2]["tool_calls"][0]["arguments"]) == {"command": "make test"}
    assert got["outcome"] == "success" and got["task"] == "Fix the flaky login test"
    assert (got["steps"], got["tool_calls"], got["failed_tool_calls"]) == (3, 4, 0)
    listed = (await client.get("/v1/runs", params={"user_id": user, "session_id": "s1"})).json()
    assert [r["run_id"] for r in listed["items"]] == [run] and listed["next_cursor"] is None


async def test_one_shot_trace_failed_tool_call_is_found_by_tool_or_error(client: httpx.AsyncClient) -> None:
    user = unique("runs")
    failed = await _start(client, user, task="Run the integration tests", project_id="api", steps=[
        {"seq": 0, "action": "run the tests", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": "make test"}, "status": "error", "duration_ms": 5300,
             "error": "psql: could not connect to server: Connection refused", "error_kind": "db_down",
             "touched": [{"name": "Postgres", "type": "service"}]}]},
        {"seq": 1, "action": "start the database", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": "docker compose up -d db"}, "status": "ok"}]},
    ], outcome={"success": False, "summary": "Postgres was not running", "error_kind": "db_down"})
    other = await _start(client, user, task="Write the README introduction", steps=[
        {"seq": 0, "action": "draft", "tool_calls": [{"tool": "Edit", "arguments": {"path": "README.md"}}]}],
        outcome={"success": True, "summary": "README has an introduction"})

    async def search(**body: Any) -> list[dict[str, Any]]:
        resp = await client.post("/v1/runs/search", json={"user_id": user, **body})
        assert resp.status_code == 200, resp.text
        results: list[dict[str, Any]] = resp.json()["results"]
        return results

    by_error = await search(query="connection refused")
    assert by_error[0]["run_id"] == failed and by_error[0]["outcome"] == "failure"
    assert by_error[0]["matched_tool_calls"][0]["error_kind"] == "db_down"
    assert "tool_calls" in by_error[0]["signals"]
    by_tool = await search(query="make test")
    assert by_tool[0]["run_id"] == failed
    assert [r["run_id"] for r in await search(query="tests", tool="bash", outcome="failure")] == [failed]
    assert [r["run_id"] for r in await search(query="postgres", error_kind="db_down")] == [failed]
    assert [r["run_id"] for r in await search(query="README", outcome="success")] == [other]
    assert await search(query="README", tool="nope") == []
    bad = await client.post("/v1/runs/search", json={"user_id": user, "query": "x", "outcome": "maybe"})
    assert bad.status_code == 422

    got = (await client.get(f"/v1/runs/{failed}", params={"user_id": user})).json()
    call = got["trace"][0]["tool_calls"][0]
    assert call["status"] == "error" and call["duration_ms"] == 5300
    assert [t["name"] for t in call["touched"]] == ["Postgres"]

    stats = (await client.get("/v1/runs/stats", params={"user_id": user})).json()
    assert (stats["runs"], stats["completed"], stats["succeeded"], stats["failed"], stats["open"]) == (2, 2, 1, 1, 0)
    assert stats["success_rate"] == 0.5
    assert stats["failures_by_tool"] == {"Bash": 1} and stats["failures_by_error_kind"] == {"db_down": 1}
    assert (stats["tool_calls"], stats["failed_tool_calls"]) == (3, 1)


async def test_arguments_and_results_are_redacted_and_bounded(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("runs")
    secret = "sk-live-0123456789abcdefSECRET"
    run = await _start(client, user, task="Call the API")
    resp = await client.post(f"/v1/runs/{run}/steps/0/tool-calls", json={
        "user_id": user, "tool": "Bash", "arguments": {"command": f"curl -H 'Authorization: Bearer {secret}' x"},
        "result": "password=hunter2hunter2\n" + "y" * 10_000})
    await _done(client, resp)
    call = (await client.get(f"/v1/runs/{run}", params={"user_id": user})).json()["trace"][0]["tool_calls"][0]
    assert secret not in call["arguments"] and "[REDACTED]" in call["arguments"]
    assert "hunter2" not in call["result"] and call["result"].endswith("chars]") and len(call["result"]) < 4100
    # nor in the queued job the task record keeps
    record = await deps.redis.get(f"{deps.settings.redis.queue_name}:task:{resp.json()['task_id']}")
    assert record is not None and secret.encode() not in record and b"hunter2" not in record


async def test_unknown_runs_are_404_and_a_deleted_run_is_erased(client: httpx.AsyncClient) -> None:
    user = unique("runs")
    assert (await client.get("/v1/runs/nope", params={"user_id": user})).status_code == 404
    step = await client.post("/v1/runs/nope/steps", json={"user_id": user, "seq": 0, "action": "x"})
    assert step.status_code == 404 and "unknown run id" in step.json()["detail"]
    run = await _start(client, user, run_id="my-run-1", task="Rotate the logs", steps=[
        {"seq": 0, "action": "rotate", "tool_calls": [{"tool": "Bash", "arguments": {"command": "logrotate"}}]}])
    assert run == "my-run-1"
    # someone else's run of the same id is their own
    other = unique("runs")
    assert (await client.get("/v1/runs/my-run-1", params={"user_id": other})).status_code == 404
    deleted = await _done(client, await client.delete(f"/v1/runs/{run}", params={"user_id": user}))
    assert deleted["result"]["deleted"] is True
    assert (await client.get(f"/v1/runs/{run}", params={"user_id": user})).status_code == 404
    assert (await client.post("/v1/runs/search", json={"user_id": user, "query": "logrotate"})).json()["results"] == []
    assert (await client.get("/v1/runs/stats", params={"user_id": user})).json()["runs"] == 0
    # the same run id may be started again afterwards
    again = await _start(client, user, run_id="my-run-1", task="Rotate the logs again")
    assert (await client.get(f"/v1/runs/{again}", params={"user_id": user})).json()["trace"] == []


async def test_search_include_traces_returns_the_run_that_touched_a_returned_entity(client: httpx.AsyncClient) -> None:
    user = unique("runs")
    await write_raw(client, user_id=user, project_id="api", category="tech_stack",
                    content="The api service stores its data in PostgreSQL and caches in Redis.")
    run = await _start(client, user, project_id="api", task="Warm the cache", steps=[
        {"seq": 0, "action": "flush", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": "redis-cli flushall"}, "status": "error",
             "error": "Could not connect to 127.0.0.1:6379", "error_kind": "service_down",
             "touched": [{"name": "Redis", "type": "service"}]}]}],
        outcome={"success": False, "summary": "the cache server was down", "error_kind": "service_down"})
    plain = (await client.post("/v1/search", json={"user_id": user, "project_id": "api", "query": "PostgreSQL"})).json()
    assert plain["results"] and plain["reasoning"] is None
    resp = await client.post("/v1/search", json={"user_id": user, "project_id": "api", "query": "PostgreSQL",
                                                 "include": ["traces"]})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert "PostgreSQL" in body["results"][0]["content"]
    [hit] = [h for h in body["reasoning"] if h["run_id"] == run]
    assert "entities" in hit["via"] and hit["entities"] == ["Redis"]
    assert hit["outcome"] == "failure" and hit["error_kind"] == "service_down"
    assert any(c["error"] == "Could not connect to 127.0.0.1:6379" for c in hit["matched_tool_calls"])
    # matched by the query too
    again = (await client.post("/v1/search", json={"user_id": user, "project_id": "api", "query": "Redis cache",
                                                   "include": ["traces"]})).json()
    assert again["reasoning"][0]["run_id"] == run and again["reasoning"][0]["via"] == ["query", "entities"]
    bad = await client.post("/v1/search", json={"user_id": user, "query": "x", "include": ["nope"]})
    assert bad.status_code == 422


async def test_runs_and_messages_round_trip_through_export_and_import(client: httpx.AsyncClient) -> None:
    user = unique("runs")
    run = await _start(client, user, task="Deploy the api", project_id="api", steps=[
        {"seq": 1, "action": "push", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": "git push"}, "status": "error", "error": "rejected",
             "error_kind": "git", "touched": [{"name": "origin", "type": "service"}]},
            {"tool": "Bash", "arguments": {"command": "git pull --rebase"}}]},
        {"seq": 0, "action": "build"}], outcome={"success": True, "summary": "pushed after a rebase"})
    conv = await client.post("/v1/memories", json={"user_id": user, "session_id": "chat-1", "messages": [
        {"id": "a", "role": "user", "content": "Deploy the api today."},
        {"role": "assistant", "content": "Deploying now."}]})
    assert (await wait_task(client, conv.json()["task_id"]))["status"] == "completed"
    before_run = (await client.get(f"/v1/runs/{run}", params={"user_id": user})).json()
    before_chat = (await client.get("/v1/conversations/chat-1", params={"user_id": user})).json()

    exported = await client.get("/v1/export", params={"user_id": user})
    lines = [json.loads(x) for x in exported.text.splitlines()]
    assert [x["type"] for x in lines].count("run") == 1 and [x["type"] for x in lines].count("message") == 2
    assert lines[-1]["counts"]["runs"] == 1 and lines[-1]["counts"]["messages"] == 2
    wiped = await client.post("/v1/memories/delete", json={"user_id": user, "all": True})
    assert (await wait_task(client, wiped.json()["task_id"]))["status"] == "completed"
    assert (await client.get(f"/v1/runs/{run}", params={"user_id": user})).status_code == 404

    for _ in range(2):  # a second import of the same file changes nothing
        resp = await client.post("/v1/import", content=exported.content,
                                 headers={"content-type": "application/x-ndjson"})
        done = await wait_task(client, resp.json()["task_id"], timeout=60)
        assert done["status"] == "completed", done
        assert done["result"]["imported"]["runs"] == 1 and done["result"]["imported"]["messages"] == 2
        assert done["result"]["rejected"] == []
        after_run = (await client.get(f"/v1/runs/{run}", params={"user_id": user})).json()
        assert after_run == before_run
        after_chat = (await client.get("/v1/conversations/chat-1", params={"user_id": user})).json()
        assert after_chat == before_chat
    found = (await client.post("/v1/runs/search", json={"user_id": user, "query": "git push rejected"})).json()
    assert [r["run_id"] for r in found["results"]] == [run]
