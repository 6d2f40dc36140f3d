"""The three hook commands. Each reads Claude Code's event JSON from stdin, never raises, never
writes anything but the documented JSON to stdout, and keeps to its time budget:

- `session_start`: GET `/v1/context/{project}` (markdown, `MEMORY_CONTEXT_TOKENS`, `MEMORY_CONTEXT_CHARS`) and print
  `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ...}}`; the request
  gets `SESSION_START_BUDGET` seconds (the whole command stays under 1.5 s); on any error, timeout or
  non-200 answer it prints nothing.
- `post_tool_use`: one observation (`observe.py`), counted in the session's state file, sent
  fire-and-forget as a raw `task_context` memory (`client.fire_and_forget`): the command returns in
  well under 300 ms whether or not the service answers.
- `post_tool_use` and `stop` also build the session's task trace (`trace.py`, docs/hooks.md).
- `stop`: a raw `interaction` memory `Session <id> ended after N observations (project P)` with
  metadata `{session_id, observations}`. Claude Code runs Stop hooks each time the main agent finishes
  responding, so the marker is sent only when the count changed since the last one (or for the first
  stop of a session): a session gets one marker per turn that captured something, the newest one
  carrying the total.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from service.hooks import client, state, trace
from service.hooks.observe import observe
from service.hooks.project import resolve_project_id
from service.hooks.settings import HookSettings

AGENT_ID = "claude-code"
SESSION_START_BUDGET = 1.2  # seconds for the context request; Python start-up and output fit in the rest
STDIN_TIMEOUT = 0.1  # Claude Code writes the event and closes stdin before we start; never wait longer
MAX_STDIN = 16 * 1024 * 1024
MAX_SESSION_ID = 128


def read_event(stream: Any = None, timeout: float = STDIN_TIMEOUT, limit: int = MAX_STDIN) -> dict[str, Any]:
    """The event object from stdin; {} when stdin is empty, a terminal, too large, slow or not a JSON object."""
    stream = sys.stdin if stream is None else stream
    try:
        if stream is None or stream.isatty():
            return {}
        raw = _read_bounded(stream, timeout, limit)
    except (OSError, ValueError, AttributeError):
        return {}
    if raw is None:
        return {}
    try:
        event = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def _read_bounded(stream: Any, timeout: float, limit: int) -> bytes | None:
    buffer = getattr(stream, "buffer", stream)
    try:
        fd = buffer.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None
    if fd is None or os.name == "nt":  # no select() on Windows pipes: a plain bounded read
        data = buffer.read(limit + 1)
        return None if len(data) > limit else bytes(data)
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None


def event_cwd(event: Mapping[str, Any], env: Mapping[str, str]) -> Path:
    """The event's working directory: its `cwd`, else the directory the wrapper started in, else ours."""
    for candidate in (event.get("cwd"), env.get("MEMORY_HOOKS_CWD"), env.get("CLAUDE_PROJECT_DIR")):
        if isinstance(candidate, str) and candidate.strip() and os.path.isabs(candidate.strip()):
            return Path(candidate.strip())
    return Path.cwd()


def session_id(event: Mapping[str, Any]) -> str | None:
    value = event.get("session_id")
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:MAX_SESSION_ID]


def _base_dir(cwd: Path, env: Mapping[str, str]) -> str:
    project_dir = (env.get("CLAUDE_PROJECT_DIR") or "").strip()
    return project_dir if project_dir and os.path.isabs(project_dir) else str(cwd)


def session_start(settings: HookSettings, event: Mapping[str, Any], env: Mapping[str, str], out: TextIO) -> None:
    started = time.monotonic()
    project = resolve_project_id(event_cwd(event, env), settings.project_id)
    query: dict[str, str | int] = {"format": "markdown", "max_chars": settings.context_chars}
    if settings.context_tokens:  # the most useful memories that fit, the project's first
        query["max_tokens"] = settings.context_tokens
    if settings.user_id:
        query["user_id"] = settings.user_id
    current = trace.api_session(session_id(event))
    if current:  # lessons come from earlier sessions, not this one
        query["session_id"] = current
    path = f"/v1/context/{client.path_segment(project)}" if project else "/v1/context/global"
    budget = SESSION_START_BUDGET - (time.monotonic() - started)
    resp = client.request(settings, "GET", path, query=query, timeout=budget)
    if resp is not None and resp.status == 200:
        text = resp.text().strip()[: settings.context_chars]
        if text:
            payload = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
            out.write(json.dumps(payload, ensure_ascii=False) + "\n")
            out.flush()
    state.prune()


def _raw_body(
    settings: HookSettings, content: str, category: str, project: str | None, metadata: dict[str, Any]
) -> dict[str, Any]:
    body: dict[str, Any] = {"content": content, "category": category, "agent_id": AGENT_ID, "metadata": metadata}
    if project:
        body["project_id"] = project
    if settings.user_id:
        body["user_id"] = settings.user_id
    return body


def post_tool_use(settings: HookSettings, event: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Returns how the observation was sent ("forked"/"sync"), or None when nothing was sent.

    The observation goes as a raw memory and, with a session id, as a step of the session's trace (trace.py)."""
    cwd = event_cwd(event, env)
    base = _base_dir(cwd, env)
    observation = observe(event, base)
    if observation is None:
        return None
    session = session_id(event)
    project = resolve_project_id(cwd, settings.project_id)
    session_state = state.SessionState(session)
    session_state.increment()
    metadata = {"session_id": session or "unknown", "tool": observation.tool, "fold_key": observation.fold_key}
    body = _raw_body(settings, observation.content, "task_context", project, metadata)
    seq = session_state.record_call(trace.failed(event)) if session else -1
    if session is None or seq < 0:
        return client.fire_and_forget(settings, "/v1/memories/raw", body)

    def send(deadline: float) -> None:  # in the detached child: the trace's bodies are built there, off the budget
        client.request(settings, "POST", "/v1/memories/raw", json_body=body, timeout=deadline - time.monotonic())
        start = trace.start_body(settings, session, project, AGENT_ID)
        step = trace.step_body(seq, observation, trace.tool_call(event, observation, base))
        trace.send_step(settings, start, step, deadline)

    return client.detached(send)


def stop(settings: HookSettings, event: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """The session marker (when the observation count changed) and the trace's completion (when the number of
    tool calls changed since the last one), sent together without waiting."""
    session = session_id(event)
    if session is None:
        return None
    session_state = state.SessionState(session)
    count = session_state.count()
    marker: dict[str, Any] | None = None
    if session_state.last_marked() != count:
        session_state.mark(count)
        project = resolve_project_id(event_cwd(event, env), settings.project_id)
        plural = "" if count == 1 else "s"
        content = f"Session {session} ended after {count} observation{plural} (project {project or 'none'})"
        marker = _raw_body(settings, content, "interaction", project, {"session_id": session, "observations": count})
    calls = session_state.calls()
    complete: dict[str, Any] | None = None
    if calls and session_state.last_completed() != len(calls):
        session_state.mark_completed(len(calls))
        complete = trace.complete_body(settings, calls, event)
    if marker is None and complete is None:
        return None

    def send(deadline: float) -> None:
        if marker is not None:
            client.request(settings, "POST", "/v1/memories/raw", json_body=marker, timeout=deadline - time.monotonic())
        if complete is not None:
            trace.send_complete(settings, session, complete, deadline)

    return client.detached(send)
