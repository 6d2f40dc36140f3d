"""Lessons in context against the real stack: the context endpoint shows a failed tool call of an
earlier session with what the agent did after it and how the task ended; not the current session's, not another
user's; at most a small fixed number, within the markdown bound."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import unique
from tests.integration.conftest import wait_task


async def _run(client: httpx.AsyncClient, user: str, **body: Any) -> str:
    resp = await client.post("/v1/runs", json={"user_id": user, **body})
    assert resp.status_code == 202, resp.text
    assert (await wait_task(client, resp.json()["task_id"]))["status"] == "completed"
    run_id: str = resp.json()["run_id"]
    return run_id


def _failing(command: str, error: str, session: str, **extra: Any) -> dict[str, Any]:
    return {"session_id": session, "project_id": "api", "task": f"Run {command}", "steps": [
        {"seq": 0, "action": "run it", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": command}, "status": "error", "error": error}]}], **extra}


async def test_context_shows_a_lesson_from_an_earlier_session(client: httpx.AsyncClient) -> None:
    user = unique("lessons")
    fixed = await _run(client, user, session_id="monday", project_id="api", task="Run the integration tests", steps=[
        {"seq": 0, "action": "run the tests", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": "make test"}, "status": "error", "error_kind": "db_down",
             "error": "psql: could not connect to server: Connection refused\nmake: *** [test] Error 2"}]},
        {"seq": 2, "action": "run the tests again", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": "make test"}, "status": "ok", "result": "42 passed"}]},
        {"seq": 1, "action": "start the database", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": "docker compose up -d db"}, "status": "ok"}]},
    ], outcome={"success": True, "summary": "Postgres was not running; docker compose up -d db fixed it"})
    await _run(client, user, **_failing("npm run lint", "eslint: command not found", "tuesday"))
    await _run(client, user, task="Write docs", session_id="monday", project_id="api", steps=[
        {"seq": 0, "action": "edit", "tool_calls": [{"tool": "Edit", "arguments": {"path": "README.md"}}]}])
    await _run(client, unique("someone-else"), **_failing("cargo build", "linker cc not found", "monday"))

    resp = await client.get("/v1/context/api", params={"user_id": user, "session_id": "tuesday"})
    assert resp.status_code == 200, resp.text
    lessons = resp.json()["lessons"]
    assert [x["run_id"] for x in lessons] == [fixed]  # not the current session's failure, not another user's
    [lesson] = lessons
    assert (lesson["tool"], lesson["outcome"], lesson["resolved"], lesson["error_kind"]) == (
        "Bash", "success", True, "db_down")
    assert lesson["error"].startswith("psql: could not connect to server")
    assert [c["arguments"] for c in lesson["later"]] == ['{"command": "docker compose up -d db"}',
                                                         '{"command": "make test"}']
    assert resp.json()["categories"] == [] and resp.json()["total"] == 0  # the memory context is unchanged

    text = (await client.get("/v1/context/api", params={"user_id": user, "session_id": "tuesday",
                                                        "format": "markdown"})).text
    part = text.split("## From earlier sessions\n", 1)[1]
    assert part == ("- `Bash` `make test` failed: psql: could not connect to server: Connection refused; "
                    "then `Bash` `docker compose up -d db`, `Bash` `make test` went through; the task succeeded: "
                    "Postgres was not running; docker compose up -d db fixed it (task: Run the integration tests)\n")

    # without a current session both lessons show, the resolved one first; another project's context too
    # (runs of a project show in that project's context and runs of no project everywhere)
    both = (await client.get("/v1/context/api", params={"user_id": user})).json()["lessons"]
    assert [x["tool"] for x in both] == ["Bash", "Bash"] and both[0]["run_id"] == fixed
    assert not both[1]["resolved"] and both[1]["outcome"] == "open"
    elsewhere = (await client.get("/v1/context/web", params={"user_id": user})).json()["lessons"]
    assert elsewhere == []


async def test_lessons_are_few_and_fit_the_bound(client: httpx.AsyncClient) -> None:
    user = unique("lessons")
    for n in range(5):
        await _run(client, user, **_failing(f"tool-{n} --flag", f"error number {n}: " + "x" * 300, f"s{n}"))
    await _run(client, user, **_failing("tool-0 --flag", "error number 0: " + "x" * 300, "s9"))  # a repeat
    found = (await client.get("/v1/context/api", params={"user_id": user})).json()["lessons"]
    assert len(found) == 3  # the fixed cap
    assert len({x["error"] for x in found}) == 3  # a repeated failure shows once
    for max_chars in (300, 1000, 4000):
        text = (await client.get("/v1/context/api", params={"user_id": user, "format": "markdown",
                                                            "max_chars": max_chars})).text
        assert len(text) <= max_chars
        if max_chars >= 1000:
            assert "## From earlier sessions" in text and "`Bash` `tool-" in text
