"""The job kinds of the runs tier (registered in service/registry.py).

Arguments, results and errors arrive here already redacted and bounded (service/runs/intake.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.ai.embeddings import Embedder
from service.core.keys import run_accepted
from service.tasks.jobs import JobModel


class ToolCallItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str
    arguments: str | None = None  # JSON text, redacted and bounded
    result: str | None = None
    status: Literal["ok", "error"] = "ok"
    error: str | None = None
    error_kind: str | None = None
    duration_ms: int | None = None
    touched: list[tuple[str, str]] = Field(default_factory=list)  # (name, type)
    seq: int | None = None


class StepItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int
    action: str | None = None  # None: only tool calls of the step (the step itself comes in another write)
    thought: str | None = None
    tool_calls: list[ToolCallItem] = Field(default_factory=list)


class RunStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    project_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None


class RunOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    success: bool
    summary: str = ""
    error_kind: str | None = None


class RunJob(JobModel):
    """Any part of a run: its start, steps, tool calls, its outcome, or all of them (the one-shot write).
    Parts of one run may run in any order: every part MERGEs the run and its step by their keys."""

    kind: Literal["run"] = "run"
    user_id: str
    run_id: str | None = None  # None: the run id is this write's task id
    start: RunStart | None = None
    steps: list[StepItem] = Field(default_factory=list)
    outcome: RunOutcome | None = None


class RunDeleteJob(JobModel):
    kind: Literal["run_delete"] = "run_delete"
    user_id: str
    run_id: str


def accepted_marker(user_id: str, run_id: str) -> str:
    """The RedisKV key of a run accepted and not yet stored: set and read by the intake, dropped by a delete."""
    return run_accepted(user_id, run_id)


def vector_model(embedder: Embedder) -> str:
    """What a run's task and summary vectors are tagged with: a search compares only vectors of the same model."""
    return f"{embedder.name}|{embedder.variant}|{embedder.dim}"
