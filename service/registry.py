"""The job registry: every job kind declared once, with its payload model, its handler and its retry policy; its
ARQ function is the one service/tasks/functions.py names (the task queue enqueues by that table). The worker's ARQ
functions (worker/jobs.py) come from `JOB_KINDS`.

A handler is a method of one of the worker-side objects `JobHandlers` holds (built by the worker only:
worker/handlers.py); the API side of the same kinds
(validation, idempotency, enqueue) is service/memory/intake.py, service/runs/intake.py,
service/conversations/intake.py, service/graph_api/intake.py and service/maintenance/runs.py.

To add a kind: its model (service/tasks/jobs.py or its feature's jobs.py), its ARQ function in
service/tasks/functions.py, its handler on one of these objects, one line in `JOB_KINDS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from service.conversations.jobs import ConversationDeleteJob
from service.conversations.writes import ConversationWriter
from service.graph_api.communities import Communities
from service.graph_api.jobs import CommunityJob
from service.maintenance.optimize import IndexBuilder
from service.maintenance.reconcile import Reconciler
from service.maintenance.reembed import Reembedder
from service.maintenance.sweep import DedupSweep
from service.memory.portability import Importer
from service.runs.jobs import RunDeleteJob, RunJob
from service.runs.writes import RunWriter
from service.tasks.functions import FUNCTIONS
from service.tasks.jobs import (
    ConversationJob,
    DedupJob,
    DeleteJob,
    GraphWriteJob,
    ImportJob,
    JobModel,
    OptimizeJob,
    RawBatchJob,
    RawJob,
    ReconcileJob,
    ReembedJob,
    UpdateJob,
)

J = TypeVar("J", bound=JobModel)
JobResult = dict[str, Any]  # what the task's status record shows as `result`
Handler = Callable[[str, J], Awaitable[JobResult]]  # (task id, the validated job)


@dataclass(frozen=True)
class MemoryWrites:
    """The memory writes' handlers: each the `run` of a writer of service/writepath/writes.py. The registry names the
    handlers, not the writers, so it stands below the write's stages (only the worker imports them)."""

    raw: Handler[RawJob]
    raw_batch: Handler[RawBatchJob]
    conversation: Handler[ConversationJob]
    update: Handler[UpdateJob]
    delete: Handler[DeleteJob]
    graph: Handler[GraphWriteJob]  # structured entities, relations, facts (service/graph_api/)


@dataclass(frozen=True)
class JobHandlers:
    """The worker side of the job kinds, built once per worker process (worker/handlers.py)."""

    writes: MemoryWrites  # raw, raw_batch, conversation, update, delete, graph_write
    importer: Importer
    sweep: DedupSweep
    reconciler: Reconciler
    reembedder: Reembedder
    indexer: IndexBuilder  # optimize
    runs: RunWriter  # task traces: run (any part of one), run_delete
    conversations: ConversationWriter  # conversation_delete
    communities: Communities  # communities: entity communities of a user or of all


@dataclass(frozen=True)
class RetryPolicy:
    """Transient errors (worker/jobs.py `is_transient`) are retried with backoff until `max_tries` (None:
    ARQ_MAX_RETRIES + 1 attempts); anything else ends the task failed at once."""

    max_tries: int | None = None

    def tries(self, default: int) -> int:
        return self.max_tries if self.max_tries is not None else default


@dataclass(frozen=True)
class JobKind:
    function: str  # the ARQ function's name (a queued job names it: keep it stable)
    model: type[JobModel]
    handler: Callable[[JobHandlers], Handler[Any]]  # which method of the handlers runs it
    retry: RetryPolicy

    @property
    def kind(self) -> str:
        return kind_of(self.model)


def kind_of(model: type[JobModel]) -> str:
    """A job model's `kind` (the payload's discriminator)."""
    return str(model.model_fields["kind"].default)


def declare(model: type[J], handler: Callable[[JobHandlers], Handler[J]], retry: RetryPolicy | None = None) -> JobKind:
    """One entry of the registry, under the ARQ function service/tasks/functions.py names for the model's kind;
    mypy checks that the handler takes this model."""
    return JobKind(FUNCTIONS[kind_of(model)], model, handler, retry or RetryPolicy())


JOB_KINDS: tuple[JobKind, ...] = (
    declare(RawJob, lambda h: h.writes.raw),
    declare(RawBatchJob, lambda h: h.writes.raw_batch),
    declare(ConversationJob, lambda h: h.writes.conversation),
    declare(UpdateJob, lambda h: h.writes.update),
    declare(DeleteJob, lambda h: h.writes.delete),
    declare(ImportJob, lambda h: h.importer.run),
    declare(DedupJob, lambda h: h.sweep.run_requested),
    declare(ReconcileJob, lambda h: h.reconciler.run_requested),
    declare(ReembedJob, lambda h: h.reembedder.run),
    declare(OptimizeJob, lambda h: h.indexer.run, RetryPolicy(max_tries=1)),
    declare(RunJob, lambda h: h.runs.store_run),
    declare(RunDeleteJob, lambda h: h.runs.delete_run),
    declare(ConversationDeleteJob, lambda h: h.conversations.delete_session),
    declare(GraphWriteJob, lambda h: h.writes.graph),
    declare(CommunityJob, lambda h: h.communities.run),
)
