"""Structured logs: JSON lines with request_id on API events and task_id/user_id on job events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task


async def test_json_logs_carry_request_task_and_user_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user = unique("logs")
    async with running_app(tmp_path, log_format="json", log_level="INFO") as (client, _):
        bad = await client.post("/v1/memories/raw", json={"content": "x", "user_id": user, "category": "nope"},
                                headers={"x-request-id": "req-123"})
        assert bad.headers["x-request-id"] == "req-123"
        resp = await client.post("/v1/memories/raw", json={"content": "log me", "user_id": user,
                                                           "category": "preference"})
        task_id = resp.json()["task_id"]
        assert (await wait_task(client, task_id))["status"] == "completed"
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    rejected = [e for e in lines if e["event"] == "request_rejected"]
    assert rejected and rejected[0]["request_id"] == "req-123" and rejected[0]["status"] == 400
    completed = [e for e in lines if e["event"] == "job_completed" and e.get("task_id") == task_id]
    assert completed and completed[0]["user_id"] == user
    assert all({"timestamp", "level", "event"} <= set(e) for e in lines)
