"""Typed jobs: one pydantic model per job kind; its `kind` is the job's name on the wire.

The API-side intake (service/memory/intake.py) validates a request, builds one of these and enqueues it
(service/tasks/queue.py); the worker validates the payload again before running it. Which ARQ function, handler and
retry policy each kind has is declared once, in service/registry.py. `accepted_at` is set by the queue when
the job is accepted, so every replay of a job sees the same acceptance time (ids and timestamps derive from it).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class JobModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str  # each kind narrows it to its own Literal (the discriminator)
    accepted_at: str = ""


class RawItem(BaseModel):
    """One pre-categorised fact, as the API validated it (scope resolved)."""

    model_config = ConfigDict(extra="forbid")

    scope: str
    project_id: str | None = None
    category: str
    content: str
    agent_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    occurred_at: str | None = None  # stored form (domain.iso); None = the acceptance time
    pref_kind: str | None = None  # a preference's `kind` (service/memory/preferences.py; `kind` names the job)
    applies_to: list[str] = Field(default_factory=list)
    sensitivity: str | None = None  # None: the category's tier (service/core/sensitivity.py)
    thread_id: str | None = None  # with position: its place among its thread's messages (neighbouring turns)
    position: int | None = None


class RawJob(JobModel, RawItem):
    kind: Literal["raw"] = "raw"
    user_id: str


class RawBatchJob(JobModel):
    """Several facts of one user in one job: one embedding batch, one vector upsert, one graph transaction."""

    kind: Literal["raw_batch"] = "raw_batch"
    user_id: str
    items: list[RawItem] = Field(min_length=1)


class ConversationJob(JobModel):
    kind: Literal["conversation"] = "conversation"
    user_id: str
    project_id: str | None = None
    agent_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    messages: list[dict[str, Any]]
    session_id: str | None = None  # None: the messages are kept under a session named by the task id


class UpdateJob(JobModel):
    kind: Literal["update"] = "update"
    memory_id: str
    user_id: str
    content: str
    category: str | None = None


class DeleteJob(JobModel):
    """By ids, or by a filter (scope, category, project_id, agent_id; all of them unset = every memory)."""

    kind: Literal["delete"] = "delete"
    user_id: str
    memory_ids: list[str] | None = None
    scope: str | None = None
    category: str | None = None
    project_id: str | None = None
    agent_id: str | None = None


class DedupJob(JobModel):
    kind: Literal["dedup"] = "dedup"
    user_id: str | None = None
    dry_run: bool = False


class ReconcileJob(JobModel):
    kind: Literal["reconcile"] = "reconcile"
    user_id: str | None = None
    dry_run: bool = False


class ReembedJob(JobModel):
    """Re-embed stored memories with the configured embedder (service/maintenance/reembed.py)."""

    kind: Literal["reembed"] = "reembed"
    user_id: str | None = None


class OptimizeJob(JobModel):
    """Build the vector index now (service/maintenance/optimize.py)."""

    kind: Literal["optimize"] = "optimize"


class ImportJob(JobModel):
    """An uploaded export (service/memory/portability.py), held in Redis under `blob` until the job ends."""

    kind: Literal["import"] = "import"
    user_id: str
    blob: str


class GraphWriteJob(JobModel, RawItem):
    """An entity, a relation or a fact, as the memory that states it: its links are in `metadata.graph`
    (service/ledger/links.py), so it reaches the graph through the memory write path and the gate."""

    kind: Literal["graph_write"] = "graph_write"
    user_id: str
    op: Literal["entity", "relation", "fact"]
