"""Maintenance: the dedup sweep and the full reconcile on demand, and the reports of every run
(scheduled or requested)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from service import routes
from service.api.declared import on
from service.api.deps import DepsDep
from service.api.errors import responses
from service.api.idempotency import IdempotencyKey, fingerprint, remembered
from service.api.params import PAGE, PageLimit, RunId
from service.api.security import CallerDep
from service.core.errors import NotFound
from service.maintenance.optimize import submit_optimize
from service.maintenance.reembed import submit_reembed
from service.schemas.maintenance import (
    DedupAccepted,
    DedupRequest,
    DedupRunReport,
    MaintenanceRunPage,
    ReconcileAccepted,
    ReconcileRequest,
    ReembedRequest,
)
from service.schemas.memories import AcceptedResponse

router = APIRouter(prefix="/v1/maintenance", tags=["maintenance"])



@on(router, routes.DEDUP)
async def start_dedup(
    deps: DepsDep, caller: CallerDep, req: Annotated[DedupRequest | None, Body()] = None,
    idempotency_key: IdempotencyKey = None,
) -> DedupAccepted:
    """Start a dedup run (`{user_id?, dry_run?}`; no body = every user, real run). 202 with the task id,
    which is also the run id: poll `poll_url` (task status) or `run_url` (the run's report)."""
    caller.require_admin("a dedup run")
    body = req or DedupRequest()
    fp = fingerprint("POST", "/v1/maintenance/dedup", body.model_dump(mode="json"))
    return await remembered(deps.intake, caller, body.user_id, idempotency_key, fp,
                            lambda: deps.maintenance.submit_dedup(body), DedupAccepted)


@on(router, routes.RECONCILE)
async def start_reconcile(
    deps: DepsDep, caller: CallerDep, req: Annotated[ReconcileRequest | None, Body()] = None,
    idempotency_key: IdempotencyKey = None,
) -> ReconcileAccepted:
    """Compare the vector store with the graph (`{user_id?, dry_run?}`; no body = every user) and repair
    drift in both directions. 202 with the task id (= run id); the report lists repairs per kind."""
    caller.require_admin("a reconcile run")
    body = req or ReconcileRequest()
    fp = fingerprint("POST", "/v1/maintenance/reconcile", body.model_dump(mode="json"))
    return await remembered(deps.intake, caller, body.user_id, idempotency_key, fp,
                            lambda: deps.maintenance.submit_reconcile(body), ReconcileAccepted)


@on(router, routes.REEMBED)
async def start_reembed(
    deps: DepsDep, caller: CallerDep, req: Annotated[ReembedRequest | None, Body()] = None,
    idempotency_key: IdempotencyKey = None,
) -> AcceptedResponse:
    """Re-embed stored memories with the configured embedder, from their content (`{user_id?}`; no body = every
    user). 202 with the task id; the task's `progress` counts memories, and a run longer than its job's time budget
    goes on in a next task (`result.next_task_id`). An unfinished run resumes where it stopped; asking again while
    it runs answers its task. Search keeps working meanwhile."""
    caller.require_admin("re-embedding")
    body = req or ReembedRequest()

    async def submit() -> AcceptedResponse:
        task_id = await submit_reembed(deps.tasks, deps.kv, deps.query_embedder, body.user_id)
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/tasks/{task_id}")

    fp = fingerprint("POST", "/v1/maintenance/reembed", body.model_dump(mode="json"))
    return await remembered(deps.intake, caller, body.user_id, idempotency_key, fp, submit, AcceptedResponse)


@on(router, routes.OPTIMIZE)
async def optimize(deps: DepsDep, caller: CallerDep, idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """Build the vector index now, as a task (the worker also does it every 10 minutes once OPTIMIZE_MIN_UNINDEXED
    points are outside it). 202 with the task id; the task's `result` is the build's report (`backend`, `changed`,
    `backlog_before`, `backlog_after`, `figures`). Qdrant Edge builds it in a child process on a copy of the shard
    and swaps the copy in (searches pause for `figures.swap_pause_ms`); a Qdrant server indexes by itself
    (`changed` false). A build asked for while one runs fails with the reason (409's text)."""
    caller.require_admin("building the vector index")

    async def submit() -> AcceptedResponse:
        task_id = await submit_optimize(deps.tasks)
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/tasks/{task_id}")

    fp = fingerprint("POST", "/v1/maintenance/optimize", {})
    return await remembered(deps.intake, caller, None, idempotency_key, fp, submit, AcceptedResponse)


@on(router, routes.MAINTENANCE_RUNS)
async def list_runs(
    deps: DepsDep, caller: CallerDep, limit: PageLimit = PAGE,
    cursor: Annotated[str | None, Query(max_length=8, pattern=r"^[0-9]+$")] = None,
) -> MaintenanceRunPage:
    """The latest runs (dedup, reconcile and the others, `kind` tells which), newest first, without per-user
    detail (the newest RUNS_KEPT are kept). A user key sees only the runs of its own user."""
    start = int(cursor or 0)
    runs = await deps.maintenance.records.recent(start + limit + 1, only_user=caller.user_filter(None))
    page = runs[start:start + limit]
    return MaintenanceRunPage(items=page, next_cursor=str(start + limit) if len(runs) > start + limit else None)


@on(router, routes.MAINTENANCE_RUN, responses=responses(404))
async def get_run(run_id: RunId, deps: DepsDep, caller: CallerDep) -> DedupRunReport:
    """One run: start/end, status, and per user and phase (exact, near) the memories scanned, groups
    found, memories removed (ids), graph edges expired and errors."""
    report = await deps.maintenance.records.get(run_id)
    owner = caller.user_filter(None)
    if owner is not None and report.user_id != owner:
        raise NotFound(f"unknown maintenance run '{run_id}'")
    return report
