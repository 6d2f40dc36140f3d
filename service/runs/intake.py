"""The API side of task traces: validate, redact and bound (`bounded`), enqueue a RunJob, and the 404 of a part of
a run that was never accepted (a marker in Redis until the run is stored; then the graph answers).

Parts of a run are separate writes whose jobs may run in any order (service/runs/writes.py)."""

from __future__ import annotations

import json

from service.core.errors import NotFound
from service.core.kv import RedisKV
from service.runs.bounds import MAX_ERROR_CHARS, bounded
from service.runs.jobs import (
    RunDeleteJob,
    RunJob,
    RunOutcome,
    RunStart,
    StepItem,
    ToolCallItem,
    accepted_marker,
)
from service.runs.schemas import (
    CompleteRequest,
    OutcomeIn,
    RunAccepted,
    RunRequest,
    StepIn,
    StepRequest,
    ToolCallIn,
    ToolCallRequest,
)
from service.schemas.memories import AcceptedResponse
from service.stores.tiers import RunReadStore
from service.tasks.queue import TaskQueue


def _tool_call(call: ToolCallIn) -> ToolCallItem:
    arguments = json.dumps(call.arguments, sort_keys=True, default=str, ensure_ascii=False) if call.arguments else None
    return ToolCallItem(
        tool=bounded(call.tool, 128) or call.tool, arguments=bounded(arguments), result=bounded(call.result),
        status=call.status, error=bounded(call.error, MAX_ERROR_CHARS), error_kind=call.error_kind,
        duration_ms=call.duration_ms, touched=[(t.name, t.type) for t in call.touched], seq=call.seq)


def _step(step: StepIn) -> StepItem:
    return StepItem(seq=step.seq, action=bounded(step.action), thought=bounded(step.thought),
                    tool_calls=[_tool_call(c) for c in step.tool_calls])


def _outcome(outcome: OutcomeIn) -> RunOutcome:
    return RunOutcome(success=outcome.success, summary=bounded(outcome.summary) or "", error_kind=outcome.error_kind)


class RunIntake:
    def __init__(self, tasks: TaskQueue, kv: RedisKV, graph: RunReadStore) -> None:
        self.tasks = tasks
        self.kv = kv  # markers of runs accepted and not yet stored
        self.graph = graph  # a run already stored

    @staticmethod
    def _accepted(task_id: str) -> AcceptedResponse:
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/tasks/{task_id}")

    async def _enqueue(self, job: RunJob | RunDeleteJob) -> str:
        return await self.tasks.enqueue(job, job.model_dump(mode="json", exclude={"accepted_at"}))

    async def submit_run(self, req: RunRequest, user_id: str) -> RunAccepted:
        start = RunStart(task=bounded(req.task, 2000) or req.task, project_id=req.project_id,
                         session_id=req.session_id, agent_id=req.agent_id)
        job = RunJob(user_id=user_id, run_id=req.run_id, start=start, steps=[_step(s) for s in req.steps],
                     outcome=_outcome(req.outcome) if req.outcome is not None else None)
        task_id = await self._enqueue(job)
        run_id = req.run_id or task_id
        await self.kv.set_json(accepted_marker(user_id, run_id), {"task_id": task_id})
        return RunAccepted(task_id=task_id, poll_url=f"/v1/tasks/{task_id}", run_id=run_id)

    async def _known(self, user_id: str, run_id: str) -> None:
        """404 for a run this user never started: accepted recently (a marker in Redis), or stored."""
        if await self.kv.get_json(accepted_marker(user_id, run_id)) is not None:
            return
        if await self.graph.get_run(user_id, run_id) is None:
            raise NotFound(f"unknown run id '{run_id}'")

    async def submit_step(self, run_id: str, req: StepRequest, user_id: str) -> AcceptedResponse:
        await self._known(user_id, run_id)
        step = StepIn.model_validate(req.model_dump(exclude={"user_id"}))
        return self._accepted(await self._enqueue(RunJob(user_id=user_id, run_id=run_id, steps=[_step(step)])))

    async def submit_tool_call(self, run_id: str, seq: int, req: ToolCallRequest, user_id: str) -> AcceptedResponse:
        await self._known(user_id, run_id)
        call = ToolCallIn.model_validate(req.model_dump(exclude={"user_id"}))
        job = RunJob(user_id=user_id, run_id=run_id, steps=[StepItem(seq=seq, tool_calls=[_tool_call(call)])])
        return self._accepted(await self._enqueue(job))

    async def submit_complete(self, run_id: str, req: CompleteRequest, user_id: str) -> AcceptedResponse:
        await self._known(user_id, run_id)
        outcome = OutcomeIn.model_validate(req.model_dump(exclude={"user_id"}))
        return self._accepted(await self._enqueue(RunJob(user_id=user_id, run_id=run_id, outcome=_outcome(outcome))))

    async def submit_delete(self, run_id: str, user_id: str) -> AcceptedResponse:
        await self._known(user_id, run_id)
        return self._accepted(await self._enqueue(RunDeleteJob(user_id=user_id, run_id=run_id)))
