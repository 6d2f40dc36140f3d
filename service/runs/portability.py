"""Export and import of a user's task runs and conversation messages, as lines of the memory export
(service/memory/portability.py, docs/portability.md):

    {"type": "run", "run": {"id", "task", "project_id", "session_id", "agent_id", "outcome", "summary",
     "error_kind", "started_at", "completed_at", "created_at", "steps": [{"seq", "action", "thought"}],
     "tool_calls": [{"id", "step_seq", "seq", "n", "tool", "arguments", "result", "status", "error", "error_kind",
     "duration_ms", "accepted_at", "touched": [{"name", "type"}]}]}}
    {"type": "message", "message": {"session_id", "project_id", "id", "position", "role", "content", "timestamp",
     "task_id", "memory_ids", "created_at", "ord"}}

An import keeps every id, order and time (importing a file twice changes nothing), passes the text through the
same redaction and bounds as the API, re-embeds tasks and summaries with the running embedder, and resolves
touched entities through the identity gate.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from service.ai.embeddings import Embedder
from service.runs.bounds import MAX_ERROR_CHARS, bounded
from service.runs.jobs import vector_model
from service.runs.schemas import MAX_SEQ, MAX_TOUCHED, RUN_ID_PATTERN
from service.stores.graph import GraphStore
from service.stores.tiers import RunWrite

PAGE = 500
_RUN_ID = re.compile(RUN_ID_PATTERN)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$")
CALL_FIELDS = ("id", "step_seq", "seq", "n", "tool", "arguments", "result", "status", "error", "error_kind",
               "duration_ms", "accepted_at")


def _in_project(row: dict[str, Any], project_id: str | None) -> bool:
    """An export of one project holds that project's runs and sessions and those of no project (as memories:
    global + that project)."""
    return project_id is None or row.get("project_id") in (None, project_id)


async def export_tiers(graph: GraphStore, user_id: str, project_id: str | None,
                       counts: dict[str, int]) -> AsyncIterator[dict[str, Any]]:
    counts.setdefault("runs", 0)
    counts.setdefault("messages", 0)
    cursor: str | None = None
    for _ in range(100_000):  # bounded: pages of PAGE
        rows, cursor = await graph.run_reads.list_runs(user_id, None, None, PAGE, cursor)
        for row in rows:
            if not _in_project(row, project_id):
                continue
            full = await graph.run_reads.get_run(user_id, str(row["id"]))
            if full is None:
                continue  # deleted meanwhile
            counts["runs"] += 1
            yield {"type": "run", "run": _run_line(full)}
        if cursor is None:
            break
    cursor = None
    for _ in range(100_000):
        sessions, cursor = await graph.conversations.list_sessions(user_id, None, PAGE, cursor)
        for session in sessions:
            if not _in_project(session, project_id):
                continue
            mcursor: str | None = None
            for _ in range(100_000):
                messages, mcursor = await graph.conversations.session_messages(user_id, str(session["session_id"]),
                                                                               PAGE, mcursor)
                for message in messages:
                    counts["messages"] += 1
                    yield {"type": "message", "message": {**message, "session_id": session["session_id"],
                                                          "project_id": session.get("project_id")}}
                if mcursor is None:
                    break
        if cursor is None:
            break


def _run_line(full: dict[str, Any]) -> dict[str, Any]:
    keep = ("id", "task", "project_id", "session_id", "agent_id", "outcome", "summary", "error_kind", "started_at",
            "completed_at", "created_at")
    return {**{k: full.get(k) for k in keep},
            "steps": [{k: s.get(k) for k in ("seq", "action", "thought")} for s in full.get("step_rows") or []],
            "tool_calls": [{**{k: c.get(k) for k in CALL_FIELDS},
                            "touched": [{"name": t.get("name"), "type": t.get("type")} for t in c.get("touched") or []]}
                           for c in full.get("call_rows") or []]}


def _opt_id(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ID.match(value):
        raise ValueError(f"{what} is not an id")
    return value


def _seq(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEQ:
        raise ValueError(f"{what} must be an integer in 0..{MAX_SEQ}")
    return value


def _text(value: Any, limit: int = 4000) -> str | None:
    return bounded(str(value), limit) if value is not None else None


class TierImport:
    """Collects the run and message lines of an import and writes them (runs one by one, messages by write)."""

    def __init__(self, graph: GraphStore, embedder: Embedder, user_id: str) -> None:
        self.graph = graph
        self.embedder = embedder
        self.user_id = user_id
        self.runs: list[dict[str, Any]] = []
        self.messages: dict[tuple[str, str | None, str], list[dict[str, Any]]] = {}
        self.counts = {"runs": 0, "messages": 0}

    def add(self, kind: str, obj: dict[str, Any]) -> None:
        """Check one line (ValueError / TypeError / KeyError: the line is rejected)."""
        if kind == "run":
            run = obj["run"]
            if not isinstance(run, dict) or not isinstance(run.get("id"), str) or not _RUN_ID.match(run["id"]):
                raise ValueError("run without a valid id")
            self.runs.append(self._run(run))
        else:
            m = obj["message"]
            session = _opt_id(m.get("session_id"), "session_id")
            if session is None or not isinstance(m.get("content"), str) or not isinstance(m.get("role"), str):
                raise ValueError("message without session_id, role or content")
            created = str(m.get("created_at") or datetime.now(UTC).isoformat())
            key = (session, _opt_id(m.get("project_id"), "project_id"), created)
            self.messages.setdefault(key, []).append({
                "id": _opt_id(m.get("id"), "message id"), "position": _seq(m.get("position", 0), "position"),
                "ord": str(m.get("ord") or f"{created}|{len(self.messages.get(key, [])):06d}")[:100],
                "role": str(m["role"])[:32], "content": bounded(m["content"], 20_000),
                "timestamp": str(m["timestamp"])[:64] if m.get("timestamp") is not None else None,
                "task_id": str(m.get("task_id") or f"import-{created}")[:64],
                "memory_ids": [str(i)[:64] for i in (m.get("memory_ids") or [])][:100]})

    def _run(self, run: dict[str, Any]) -> dict[str, Any]:
        steps: dict[int, dict[str, Any]] = {}
        for s in run.get("steps") or []:
            seq = _seq(s.get("seq"), "step seq")
            steps[seq] = {"seq": seq, "action": _text(s.get("action")), "thought": _text(s.get("thought")),
                          "tool_calls": []}
        for c in run.get("tool_calls") or []:
            seq = _seq(c.get("step_seq"), "tool call step_seq")
            step = steps.setdefault(seq, {"seq": seq, "action": None, "thought": None, "tool_calls": []})
            if not isinstance(c.get("id"), str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", c["id"]):
                raise ValueError("tool call without a valid id")
            step["tool_calls"].append({
                "id": c["id"], "seq": _seq(c["seq"], "tool call seq") if c.get("seq") is not None else None,
                "n": _seq(c.get("n") or 0, "tool call n"), "tool": _text(c.get("tool"), 128) or "unknown",
                "arguments": _text(c.get("arguments")), "result": _text(c.get("result")),
                "status": "error" if c.get("status") == "error" else "ok",
                "error": _text(c.get("error"), MAX_ERROR_CHARS), "error_kind": _text(c.get("error_kind"), 64),
                "duration_ms": int(c["duration_ms"]) if isinstance(c.get("duration_ms"), int) else None,
                "accepted_at": str(c.get("accepted_at") or "")[:64] or None,
                "touched": [[str(t["name"])[:200], str(t.get("type") or "thing")[:64]]
                            for t in (c.get("touched") or [])[:MAX_TOUCHED] if t.get("name")]})
        outcome = run.get("outcome")
        return {
            "id": run["id"], "created_at": str(run.get("created_at") or datetime.now(UTC).isoformat())[:64],
            "started_at": run.get("started_at"), "completed_at": run.get("completed_at"),
            "start": {"task": _text(run["task"], 2000), "project_id": _opt_id(run.get("project_id"), "project_id"),
                      "session_id": _opt_id(run.get("session_id"), "session_id"),
                      "agent_id": _opt_id(run.get("agent_id"), "agent_id")} if run.get("task") else None,
            "steps": [steps[k] for k in sorted(steps)],
            "outcome": {"success": outcome == "success", "summary": _text(run.get("summary")) or "",
                        "error_kind": _text(run.get("error_kind"), 64)} if outcome in ("success", "failure") else None,
        }

    async def flush(self) -> dict[str, int]:
        model = vector_model(self.embedder)
        for run in self.runs:
            task = run["start"]["task"] if run["start"] else ""
            summary = run["outcome"]["summary"] if run["outcome"] else ""
            wanted = [t for t in (task, summary) if t]
            vectors = iter(await self.embedder.embed(wanted)) if wanted else iter(())
            task_vec = next(vectors) if task else None
            summary_vec = next(vectors) if summary else None
            started = str(run["started_at"] or run["created_at"])
            await self.graph.runs.write_run(RunWrite(
                user_id=self.user_id, run_id=run["id"], accepted_at=min(started, run["created_at"]),
                start=run["start"], steps=run["steps"], task_vec=task_vec, vec_model=model, restore=True))
            if run["outcome"] is not None:
                await self.graph.runs.write_run(RunWrite(
                    user_id=self.user_id, run_id=run["id"], accepted_at=str(run["completed_at"] or started),
                    outcome=run["outcome"], summary_vec=summary_vec, vec_model=model, restore=True))
            self.counts["runs"] += 1
        for (session, project_id, created), rows in sorted(self.messages.items(), key=lambda kv: kv[0][2]):
            await self.graph.conversations.store_messages(self.user_id, session, project_id, created, rows,
                                                          restore=True)
            self.counts["messages"] += len(rows)
        self.runs, self.messages = [], {}
        return self.counts
