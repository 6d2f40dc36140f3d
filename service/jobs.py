"""Typed jobs: one pydantic model per job kind, one ARQ function per kind (worker/jobs.py).

The API validates a request, builds one of these and enqueues it (service/queue.py); the worker
validates the payload again before running it. `accepted_at` is set by the queue when the job is
accepted, so every replay of a job sees the same acceptance time (ids and timestamps derive from it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.runs.jobs import ConversationDeleteJob, RunDeleteJob, RunJob


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid")

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


class RawJob(_Job, RawItem):
    kind: Literal["raw"] = "raw"
    user_id: str


class RawBatchJob(_Job):
    """Several facts of one user in one job: one embedding batch, one vector upsert, one graph transaction."""

    kind: Literal["raw_batch"] = "raw_batch"
    user_id: str
    items: list[RawItem] = Field(min_length=1)


class ConversationJob(_Job):
    kind: Literal["conversation"] = "conversation"
    user_id: str
    project_id: str | None = None
    agent_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    messages: list[dict[str, Any]]
    session_id: str | None = None  # None: the messages are kept under a session named by the task id


class UpdateJob(_Job):
    kind: Literal["update"] = "update"
    memory_id: str
    user_id: str
    content: str
    category: str | None = None


class DeleteJob(_Job):
    """By ids, or by a filter (scope, category, project_id, agent_id; all of them unset = every memory)."""

    kind: Literal["delete"] = "delete"
    user_id: str
    memory_ids: list[str] | None = None
    scope: str | None = None
    category: str | None = None
    project_id: str | None = None
    agent_id: str | None = None


class DedupJob(_Job):
    kind: Literal["dedup"] = "dedup"
    user_id: str | None = None
    dry_run: bool = False


class ReconcileJob(_Job):
    kind: Literal["reconcile"] = "reconcile"
    user_id: str | None = None
    dry_run: bool = False


class ReembedJob(_Job):
    """Re-embed stored memories with the configured embedder (service/maintenance/reembed.py)."""

    kind: Literal["reembed"] = "reembed"
    user_id: str | None = None


class ImportJob(_Job):
    """An uploaded export (service/memory/portability.py), held in Redis under `blob` until the job ends."""

    kind: Literal["import"] = "import"
    user_id: str
    blob: str


Job = Annotated[
    RawJob | RawBatchJob | ConversationJob | UpdateJob | DeleteJob | DedupJob | ReconcileJob | ImportJob | ReembedJob
    | RunJob | RunDeleteJob | ConversationDeleteJob,  # the last three: service/runs/jobs.py (issue 28)
    Field(discriminator="kind"),
]
JobKind = Literal["raw", "raw_batch", "conversation", "update", "delete", "dedup", "reconcile", "import", "reembed",
                  "run", "run_delete", "conversation_delete"]

# The ARQ function that runs each kind (registered in worker/settings.py).
FUNCTIONS: dict[str, str] = {
    "raw": "memory_raw",
    "raw_batch": "memory_raw_batch",
    "conversation": "memory_conversation",
    "update": "memory_update",
    "delete": "memory_delete",
    "dedup": "maintenance_dedup",
    "reconcile": "maintenance_reconcile",
    "import": "memory_import",
    "reembed": "maintenance_reembed",
    "run": "run_write",
    "run_delete": "run_delete",
    "conversation_delete": "conversation_delete",
}
