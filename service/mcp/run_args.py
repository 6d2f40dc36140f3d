"""The arguments of the MCP task-run tools (start a task, record a step, finish it, recall similar tasks); their
fields and docstrings are what the agent reads."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from service.core.domain import ID_PATTERN
from service.mcp.args import AgentId, ProjectId, Query, UserId, Wait
from service.runs.schemas import (
    ERROR_KIND_PATTERN,
    MAX_ACTION_CHARS,
    MAX_SEQ,
    MAX_SUMMARY_CHARS,
    MAX_TASK_CHARS,
    MAX_THOUGHT_CHARS,
    MAX_TOOL_CALLS,
    RUN_ID_PATTERN,
    Outcome,
    ToolCallIn,
)

RunIdArg = Annotated[str, Field(pattern=RUN_ID_PATTERN, description="The run_id start_task returned.")]
ErrorKind = Annotated[str | None, Field(pattern=ERROR_KIND_PATTERN,
                                        description="A short label of what went wrong, e.g. db_down, timeout.")]


class StartTaskArgs(BaseModel):
    """Start recording a task you are about to work on (a "run"): what you try, which tool calls fail, how it
    ends. Record each step with record_task_step and the end with finish_task; later sessions find it with
    recall_similar_tasks (and the project context shows its failures as lessons). Returns the run_id."""

    task: Annotated[str, Field(min_length=1, max_length=MAX_TASK_CHARS, description="The task, in a sentence.")]
    user_id: UserId
    project_id: ProjectId = None
    session_id: Annotated[str | None, Field(min_length=1, max_length=128, pattern=ID_PATTERN,
                                            description="The agent session this task belongs to.")] = None
    run_id: Annotated[str | None, Field(pattern=RUN_ID_PATTERN, description=(
        "Your own id for the run (letters, digits, _ and -); without it the answer's run_id."))] = None
    agent_id: AgentId = None


class StartedTask(BaseModel):
    """A queued start of a run."""

    run_id: str
    task_id: str
    status: Literal["accepted"] = "accepted"
    message: str = "Recording. Add steps with record_task_step and the outcome with finish_task."


class RecordStepArgs(BaseModel):
    """Record one step of a started task: what you did (action), optionally why (thought), and the tool calls
    it made with their arguments, result or error. Failed calls (status=error, with the error text) are what
    later sessions learn from. Secrets are redacted and long texts cut by the service. Steps may arrive in any
    order; they read back in seq order."""

    run_id: RunIdArg
    user_id: UserId
    seq: Annotated[int, Field(ge=0, le=MAX_SEQ, description="The step's position in the task: 0, 1, 2, ...")]
    action: Annotated[str, Field(min_length=1, max_length=MAX_ACTION_CHARS, description="What this step did.")]
    thought: Annotated[str | None, Field(max_length=MAX_THOUGHT_CHARS, description="Why (optional).")] = None
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=MAX_TOOL_CALLS, description=(
        "The step's tool calls: {tool, arguments?, result?, status: ok|error, error?, error_kind?, duration_ms?, "
        "touched?: [{name, type}]} (touched: the files, services or people the call acted on)."))] = []
    wait: Wait = False


class FinishTaskArgs(BaseModel):
    """Record how a started task ended: success or not, a summary of what worked (the fix, when something had
    failed: later sessions see it beside the failure), and an error kind when it failed."""

    run_id: RunIdArg
    user_id: UserId
    success: Annotated[bool, Field(description="true: the task was done.")]
    summary: Annotated[str, Field(max_length=MAX_SUMMARY_CHARS, description=(
        "What happened, e.g. 'Postgres was not running; docker compose up -d db fixed it'."))] = ""
    error_kind: ErrorKind = None
    wait: Wait = False


class RecallTasksArgs(BaseModel):
    """Find earlier tasks like this one (by meaning and by words, including their tool calls' commands and
    errors), each with its outcome, summary and the tool calls that matched: use it before a task, or when a
    tool call fails, to see what happened last time and what fixed it."""

    query: Query
    user_id: UserId
    project_id: ProjectId = None
    outcome: Annotated[Outcome | None, Field(description="Only runs that ended so (open = not finished).")] = None
    tool: Annotated[str | None, Field(min_length=1, max_length=128,
                                      description="Only runs with a call of this tool.")] = None
    error_kind: ErrorKind = None
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many runs.")] = 5
