"""Task traces ("runs"): what an agent tried, its tool calls, how the task ended. Writes answer 202 with a
task id (poll /v1/tasks/{task_id}); reads are synchronous. The tenant comes from the API key."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from service import routes
from service.api.declared import on
from service.api.deps import DepsDep, RunIntakeDep, RunsDep
from service.api.errors import responses
from service.api.idempotency import IdempotencyKey, fingerprint, once
from service.api.params import PAGE, IdQuery, OptionalUserQuery, PageLimit, PairCursor, RunId, SessionQuery
from service.api.security import CallerDep
from service.runs.schemas import (
    MAX_SEQ,
    CompleteRequest,
    RunAccepted,
    RunOut,
    RunPage,
    RunRequest,
    RunSearchRequest,
    RunSearchResponse,
    RunStats,
    StepRequest,
    ToolCallRequest,
)
from service.schemas.memories import AcceptedResponse

router = APIRouter(prefix="/v1/runs", tags=["runs"])


StepSeq = Annotated[int, Path(ge=0, le=MAX_SEQ)]


@on(router, routes.START_RUN)
async def start_run(req: RunRequest, runs: RunIntakeDep, deps: DepsDep, caller: CallerDep,
                    idempotency_key: IdempotencyKey = None) -> RunAccepted:
    """Start a run (`task`); with `steps` and `outcome` this is the one-shot write of a whole trace. The answer
    names the run: `run_id` as given, else the task id of this write."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/runs", req.model_dump(mode="json"))
    accepted = await once(deps.intake, caller, user, idempotency_key, fp, lambda: runs.submit_run(req, user))
    return RunAccepted(task_id=accepted.task_id, poll_url=accepted.poll_url, run_id=req.run_id or accepted.task_id)


@on(router, routes.LIST_RUNS)
async def list_runs(runs: RunsDep, caller: CallerDep, user_id: OptionalUserQuery = None,
                    session_id: SessionQuery = None, project_id: IdQuery = None, limit: PageLimit = PAGE,
                    cursor: PairCursor = None) -> RunPage:
    """The user's runs, newest first (optionally of one session or project)."""
    return await runs.list_runs(caller.user(user_id), session_id, project_id, limit, cursor)


@on(router, routes.SEARCH_RUNS)
async def search_runs(req: RunSearchRequest, runs: RunsDep, caller: CallerDep) -> RunSearchResponse:
    """Past runs by task and summary, and by their tool calls (tool, arguments, error, error kind): dense and
    lexical, fused; filters on outcome, tool and error kind."""
    return await runs.search(req, caller.user(req.user_id))


@on(router, routes.RUN_STATS)
async def run_stats(runs: RunsDep, caller: CallerDep, user_id: OptionalUserQuery = None,
                    project_id: IdQuery = None) -> RunStats:
    """How many runs, the success rate of the completed ones, failed tool calls by tool, failed runs by error
    kind."""
    return await runs.stats(caller.user(user_id), project_id)


@on(router, routes.GET_RUN, responses=responses(404))
async def get_run(run_id: RunId, runs: RunsDep, caller: CallerDep, user_id: OptionalUserQuery = None) -> RunOut:
    """The run with its steps in `seq` order, each with its tool calls in order, whatever order they were
    written in."""
    return await runs.get_run(run_id, caller.user(user_id))


@on(router, routes.DELETE_RUN, responses=responses(404))
async def delete_run(run_id: RunId, runs: RunIntakeDep, deps: DepsDep, caller: CallerDep,
                     user_id: OptionalUserQuery = None, idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """Erase the run, its steps and tool calls."""
    user = caller.user(user_id)
    fp = fingerprint("DELETE", f"/v1/runs/{run_id}", {"user_id": user})
    return await once(deps.intake, caller, user, idempotency_key, fp, lambda: runs.submit_delete(run_id, user))


@on(router, routes.ADD_STEP, responses=responses(404))
async def add_step(run_id: RunId, req: StepRequest, runs: RunIntakeDep, deps: DepsDep, caller: CallerDep,
                   idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """One step (`seq`, `action`, `thought`, optionally its tool calls)."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", f"/v1/runs/{run_id}/steps", req.model_dump(mode="json"))
    return await once(deps.intake, caller, user, idempotency_key, fp, lambda: runs.submit_step(run_id, req, user))


@on(router, routes.ADD_TOOL_CALL, responses=responses(404))
async def add_tool_call(run_id: RunId, seq: StepSeq, req: ToolCallRequest, runs: RunIntakeDep, deps: DepsDep,
                        caller: CallerDep, idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """A tool call of step `seq`: arguments and result are redacted and bounded before they are queued. Two
    identical calls within IDEMPOTENCY_WINDOW_SECONDS are one write unless they carry different `seq`."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", f"/v1/runs/{run_id}/steps/{seq}/tool-calls", req.model_dump(mode="json"))
    return await once(deps.intake, caller, user, idempotency_key, fp,
                      lambda: runs.submit_tool_call(run_id, seq, req, user))


@on(router, routes.COMPLETE_RUN, responses=responses(404))
async def complete_run(run_id: RunId, req: CompleteRequest, runs: RunIntakeDep, deps: DepsDep, caller: CallerDep,
                       idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """The run's outcome: `success`, `summary`, `error_kind`."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", f"/v1/runs/{run_id}/complete", req.model_dump(mode="json"))
    return await once(deps.intake, caller, user, idempotency_key, fp,
                      lambda: runs.submit_complete(run_id, req, user))
