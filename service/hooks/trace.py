"""One task trace ("run", docs/runs.md) per Claude Code session, built by the hooks without being asked.

- The run id is derived from the session id (`cc-<session id>`, or `cc-<sha256 prefix>` when the session id is
  not a valid run id), so every hook of a session writes to the same run, whichever process sends it.
- `post-tool-use` (PostToolUse and PostToolUseFailure) adds one step per tool call: the step's `seq` is the
  call's position in the session (a one-byte append to the session's `.calls` file, `state.py`), its action the
  observation line, and its tool call the tool, a few redacted arguments (command, path, URL, query; never file
  contents), `status` (`error` for a PostToolUseFailure), the redacted error and `duration_ms`. The session's
  first call starts the run with it (`POST /v1/runs`); later calls go to `POST /v1/runs/{id}/steps` and, when the
  start has not been accepted yet (404: calls of one turn run in parallel), start the run themselves.
- `stop` completes the run: success unless the session's last tool call failed, with a summary of the counts and
  Claude's last message (`last_assistant_message`). Stop runs after each turn; the later completion wins.

Everything sent is redacted here (`redact.py`) and again by the API. Standard library only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from service.hooks import client
from service.hooks.observe import (
    FAILURE_EVENT,
    Observation,
    display_path,
    head_at_space,
    redact_command,
    safe_url,
)
from service.hooks.redact import redact
from service.hooks.settings import HookSettings

RUN_PREFIX = "cc-"
MAX_ARGUMENT = 500
MAX_ERROR = 2000
MAX_MESSAGE = 1500
PATH_KEYS = ("file_path", "notebook_path", "path")
TEXT_KEYS = ("query", "pattern", "description", "subagent_type", "prompt")
_RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,61}$")
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$")  # the API's ID_PATTERN
RETRY_DELAYS = (0.2, 0.4, 0.8)  # stop's completion waits for the run's start to be accepted


def run_id(session: str) -> str:
    if _RUN_ID.match(session):
        return RUN_PREFIX + session
    import hashlib  # rare (session ids are UUIDs): not on every hook's import path (OpenSSL loads in ~10 ms)

    return RUN_PREFIX + hashlib.sha256(session.encode("utf-8", errors="replace")).hexdigest()[:40]


def api_session(session: str | None) -> str | None:
    """The session id as the API takes it (`session_id` of runs and of the context), None when it would not."""
    return session if session and _SESSION_ID.match(session) else None


def failed(event: Mapping[str, Any]) -> bool:
    return event.get("hook_event_name") == FAILURE_EVENT


def arguments(event: Mapping[str, Any], base: str | None) -> dict[str, str]:
    """A few of the tool's inputs, redacted and bounded; file contents and edited text are never copied."""
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, Mapping):
        return {}
    out: dict[str, str] = {}
    command = tool_input.get("command")
    if isinstance(command, str) and command.strip():
        out["command"] = redact_command(head_at_space(command, MAX_ARGUMENT))
    for key in PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            out[key] = redact(display_path(value, base))[:MAX_ARGUMENT]
    url = tool_input.get("url")
    if isinstance(url, str) and url.strip():
        out["url"] = safe_url(head_at_space(url, MAX_ARGUMENT))[0]
    for key in TEXT_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            out[key] = redact(head_at_space(value, MAX_ARGUMENT))
    return out


def tool_call(event: Mapping[str, Any], observation: Observation, base: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {"tool": observation.tool, "arguments": arguments(event, base), "seq": 0}
    if failed(event):
        raw = event.get("error")
        detail = redact(raw[-MAX_ERROR:]) if isinstance(raw, str) else ""
        call["status"] = "error"
        call["error"] = (observation.content + ("\n" + detail if detail else ""))[: MAX_ERROR * 2]
        if event.get("is_interrupt") is True:
            call["error_kind"] = "interrupted"
    else:
        call["status"] = "ok"
        call["result"] = observation.content
    duration = event.get("duration_ms")
    if isinstance(duration, int) and not isinstance(duration, bool) and 0 <= duration <= 86_400_000:
        call["duration_ms"] = duration
    return call


def _with_user(settings: HookSettings, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "user_id": settings.user_id} if settings.user_id else body


def start_body(settings: HookSettings, session: str, project: str | None, agent_id: str) -> dict[str, Any]:
    body: dict[str, Any] = {"run_id": run_id(session), "agent_id": agent_id,
                            "task": f"Claude Code session {session[:64]} (project {project or 'none'})"}
    if api_session(session):
        body["session_id"] = session
    if project:
        body["project_id"] = project
    return _with_user(settings, body)


def step_body(seq: int, observation: Observation, call: dict[str, Any]) -> dict[str, Any]:
    return {"seq": seq, "action": observation.content, "tool_calls": [call]}


def send_step(settings: HookSettings, start: dict[str, Any], step: dict[str, Any], deadline: float) -> None:
    """The step, in the run (started by the session's first call, or by this one when the start is not there)."""
    left = deadline - time.monotonic()
    if step["seq"] == 0:
        client.request(settings, "POST", "/v1/runs", json_body={**start, "steps": [step]}, timeout=left)
        return
    path = f"/v1/runs/{client.path_segment(start['run_id'])}/steps"
    resp = client.request(settings, "POST", path, json_body=_with_user(settings, step), timeout=left)
    if resp is not None and resp.status == 404:
        left = deadline - time.monotonic()
        client.request(settings, "POST", "/v1/runs", json_body={**start, "steps": [step]}, timeout=left)


def complete_body(settings: HookSettings, calls: bytes, event: Mapping[str, Any]) -> dict[str, Any]:
    """Success unless the session's last tool call failed; the counts and Claude's last message as summary."""
    failures = calls.count(b"x")
    success = not calls.endswith(b"x")
    plural = "" if len(calls) == 1 else "s"
    counts = f"{len(calls)} tool call{plural}, {failures} failed"
    message = event.get("last_assistant_message")
    text = redact(head_at_space(message, MAX_MESSAGE)) if isinstance(message, str) and message.strip() else ""
    body: dict[str, Any] = {"success": success, "summary": f"{text} ({counts})" if text else counts}
    if not success:
        body["error_kind"] = "tool_error"
    return _with_user(settings, body)


def send_complete(settings: HookSettings, session: str, body: dict[str, Any], deadline: float) -> None:
    """Complete the run; a 404 (its start not accepted yet) is retried a few times within the deadline."""
    path = f"/v1/runs/{client.path_segment(run_id(session))}/complete"
    for delay in (*RETRY_DELAYS, None):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        resp = client.request(settings, "POST", path, json_body=body, timeout=left)
        if resp is None or resp.status != 404 or delay is None:
            return
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
