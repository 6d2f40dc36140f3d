"""Lessons from earlier sessions: a failed tool call of a prior run, with what the agent did after it and how the
task ended. The context endpoint (and so the Claude Code `session-start` hook) shows a few of them.

`lessons()` reads the newest runs with a failed tool call (not of the current session; of the project and of no
project), takes each run's last failed call and the successful calls that followed it, and keeps at most
`cap` lessons: resolved ones first (the run succeeded, or a later call of the same tool went through), then the
newest; one per (tool, error) so a repeated failure is shown once. The context route passes them, one
`lesson_line()` each, as a section that shares the context budget (service/search/context.py). Everything shown
was redacted when the run was written (docs/runs.md).
"""

from __future__ import annotations

import json
from typing import Any

from service.runs.schemas import LaterCall, Lesson, Outcome
from service.stores.tiers import RunReadStore

LESSONS = 3  # the fixed cap of lessons in a context
SCAN = 50  # runs with a failure looked at
AFTER = 3  # successful calls after the failure kept per lesson
HEADING = "## From earlier sessions"
ARG_KEYS = ("command", "file_path", "path", "url", "query", "pattern", "description")


def _lesson(row: dict[str, Any]) -> Lesson:
    run, failed = row["run"], row["failed"]
    later = [LaterCall(tool=str(a.get("tool") or ""), arguments=a.get("arguments"), step=a.get("step"))
             for a in row.get("after") or []]
    outcome: Outcome = run.get("outcome") or "open"
    tool = str(failed.get("tool") or "")
    return Lesson(run_id=str(run["id"]), session_id=run.get("session_id"), task=run.get("task"), tool=tool,
                  arguments=failed.get("arguments"), error=failed.get("error"),
                  error_kind=failed.get("error_kind") or run.get("error_kind"), outcome=outcome,
                  summary=run.get("summary") or None, later=later,
                  resolved=outcome == "success" or any(c.tool == tool for c in later),
                  at=run.get("completed_at") or run.get("created_at"))


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


async def lessons(graph: RunReadStore, user_id: str, project_id: str | None, session_id: str | None = None,
                  cap: int = LESSONS) -> list[Lesson]:
    """At most `cap` lessons for a context (see the module's docstring)."""
    if cap <= 0:
        return []
    rows = await graph.lessons(user_id, project_id, session_id, SCAN, AFTER)
    found = sorted((_lesson(r) for r in rows), key=lambda x: (not x.resolved, -_stamp(x.at)))
    kept: list[Lesson] = []
    seen: set[tuple[str, str]] = set()
    for lesson in found:
        key = (lesson.tool.casefold(), _first_line(lesson.error).casefold()[:120])
        if key in seen:
            continue
        seen.add(key)
        kept.append(lesson)
        if len(kept) >= cap:
            break
    return kept


def _stamp(at: str | None) -> float:
    """An ISO time as a sortable number (newest = largest); unknown times last."""
    digits = "".join(ch for ch in (at or "") if ch.isdigit())[:20]
    return float(digits) if digits else 0.0


def shown_arguments(arguments: str | None, limit: int = 80) -> str:
    """A short form of a call's arguments (JSON text): the command, path, URL or query when there is one."""
    if not arguments:
        return ""
    try:
        value = json.loads(arguments)
    except ValueError:
        value = arguments
    if isinstance(value, dict):
        for key in ARG_KEYS:
            if isinstance(value.get(key), str) and value[key].strip():
                value = value[key]
                break
        else:
            value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _cut(" ".join(str(value).split()), limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def lesson_line(lesson: Lesson) -> str:
    """One bullet: what failed, with what error; what came after; how the task ended."""
    args = shown_arguments(lesson.arguments)
    call = f"`{lesson.tool}`" + (f" `{args}`" if args else "")
    error = _cut(_first_line(lesson.error) or lesson.error_kind or "an error", 160)
    parts = [f"- {call} failed: {error}"]
    if lesson.later:
        then = ", ".join(f"`{c.tool}`" + (f" `{shown_arguments(c.arguments, 60)}`" if c.arguments else "")
                         for c in lesson.later)
        parts.append(f"then {then} went through")
    if lesson.outcome == "success":
        parts.append("the task succeeded" + (f": {_cut(' '.join(lesson.summary.split()), 240)}"
                                             if lesson.summary else ""))
    elif lesson.outcome == "failure":
        parts.append("the task failed" + (f": {_cut(' '.join(lesson.summary.split()), 240)}"
                                          if lesson.summary else ""))
    task = f" (task: {_cut(' '.join(lesson.task.split()), 100)})" if lesson.task else ""
    return "; ".join(parts) + task
