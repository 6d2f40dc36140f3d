"""Maintenance: the dedup sweep and the full reconcile on demand, and the reports of every run
(scheduled or requested)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from service.api.deps import DepsDep
from service.api.params import RunId
from service.api.security import CallerDep
from service.errors import NotFound
from service.maintenance.reembed import Reembedder
from service.maintenance.runs import make_runs, submit_dedup, submit_reconcile
from service.schemas import (
    AcceptedResponse,
    DedupAccepted,
    DedupRequest,
    DedupRunList,
    DedupRunReport,
    OptimizeReport,
    ReconcileRequest,
    ReembedRequest,
)

router = APIRouter(prefix="/v1/maintenance", tags=["maintenance"])



@router.post("/dedup", status_code=202, response_model=DedupAccepted)
async def start_dedup(
    deps: DepsDep, caller: CallerDep, req: Annotated[DedupRequest | None, Body()] = None
) -> DedupAccepted:
    """Start a dedup run (`{user_id?, dry_run?}`; no body = every user, real run). 202 with the task id,
    which is also the run id: poll `poll_url` (task status) or `run_url` (the run's report)."""
    caller.require_admin("a dedup run")
    return await submit_dedup(deps, req or DedupRequest())


@router.post("/reconcile", status_code=202, response_model=DedupAccepted)
async def start_reconcile(
    deps: DepsDep, caller: CallerDep, req: Annotated[ReconcileRequest | None, Body()] = None
) -> DedupAccepted:
    """Compare the vector store with the graph (`{user_id?, dry_run?}`; no body = every user) and repair
    drift in both directions. 202 with the task id (= run id); the report lists repairs per kind."""
    caller.require_admin("a reconcile run")
    return await submit_reconcile(deps, req or ReconcileRequest())


@router.post("/reembed", status_code=202, response_model=AcceptedResponse)
async def start_reembed(
    deps: DepsDep, caller: CallerDep, req: Annotated[ReembedRequest | None, Body()] = None
) -> AcceptedResponse:
    """Re-embed stored memories with the configured embedder, from their content (`{user_id?}`; no body = every
    user). 202 with the task id; the task's `progress` counts memories, and a run longer than its job's time budget
    goes on in a next task (`result.next_task_id`). An unfinished run resumes where it stopped; asking again while
    it runs answers its task. Search keeps working meanwhile."""
    caller.require_admin("re-embedding")
    body = req or ReembedRequest()
    task_id = await Reembedder(deps.settings, deps.tasks, deps.vectors, deps.service.query_embedder,
                               deps.jobs.reembedder.locks, deps.jobs.reembedder.ledger).submit(body.user_id)
    return AcceptedResponse(task_id=task_id, poll_url=f"/v1/memories/status/{task_id}")


@router.post("/optimize", response_model=OptimizeReport)
async def optimize(deps: DepsDep, caller: CallerDep) -> OptimizeReport:
    """Build the vector index now (the worker also does it every 10 minutes once OPTIMIZE_MIN_UNINDEXED
    points are outside it). Qdrant Edge builds it in a child process on a copy of the shard and swaps the copy
    in (searches pause for `swap_pause_ms`); a Qdrant server indexes by itself (`changed` false). Answers when
    done: minutes at 100k+ memories."""
    caller.require_admin("building the vector index")
    backlog = await deps.vectors.index_backlog()
    changed = await deps.vectors.optimize()
    figures = getattr(deps.vectors, "last_optimize", {})
    return OptimizeReport(backend=deps.vectors.name, changed=changed, backlog_before=backlog,
                          backlog_after=await deps.vectors.index_backlog(), figures=figures)


@router.get("/runs", response_model=DedupRunList)
async def list_runs(
    deps: DepsDep, caller: CallerDep, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> DedupRunList:
    """The latest runs (dedup and reconcile, `kind` tells which), newest first, without per-user detail.
    A user key sees only the runs of its own user."""
    return DedupRunList(runs=await make_runs(deps).recent(limit, only_user=caller.user_filter(None)))


@router.get("/runs/{run_id}", response_model=DedupRunReport)
async def get_run(run_id: RunId, deps: DepsDep, caller: CallerDep) -> DedupRunReport:
    """One run: start/end, status, and per user and phase (exact, near) the memories scanned, groups
    found, memories removed (ids), graph edges expired and errors."""
    report = await make_runs(deps).get(run_id)
    owner = caller.user_filter(None)
    if owner is not None and report.user_id != owner:
        raise NotFound(f"unknown maintenance run '{run_id}'")
    return report
