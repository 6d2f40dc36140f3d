"""A task's status record in Redis (`<queue>:task:<id>`): what the API answers when a task is polled, and what the
worker writes as a job runs and ends (processing, retrying, completed, failed; progress; the graph half's state).
An ended task's record lives TASK_TTL_SECONDS; ending it also ends its pending entry, lease, idempotency pointer and
step caches in one script (FINISH)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import structlog
from arq.connections import ArqRedis

from service.core.domain import TaskStatus, now_iso
from service.core.errors import DependencyUnavailable, NotFound
from service.core.kv import STEPS, redis_settle
from service.core.settings import RedisQueueSettings
from service.tasks.part import ENDED, RedisPart
from service.tasks.scripts import FINISH
from service.tasks.status import TaskResponse

log = structlog.get_logger(__name__)

# With REDIS_WAIT_REPLICAS, how long a job's claim waits for the replicas before the job is retried (mark_processing).
CLAIM_HOLD_S = 10.0
USER_TASKS_KEPT = 200  # the newest task ids kept in a user's index (<queue>:utasks:<user>)


class TaskRecords(RedisPart):
    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings) -> None:
        super().__init__(redis, settings)
        self._finish_script = redis.register_script(FINISH)

    async def status(self, task_id: str, owner: str | None = None) -> TaskResponse:
        """A task's status; a task of another user than `owner` (when given) is unknown (404)."""
        rec = await self.record(task_id)
        if rec is None or (owner is not None and rec.get("user_id") != owner):
            raise NotFound(f"unknown task id '{task_id}' (task records expire after TASK_TTL_SECONDS)")
        return TaskResponse(task_id=task_id, status=rec["status"], result=rec["result"], error=rec["error"],
                            progress=rec.get("progress"), retry=rec.get("retry"))

    async def recent(self, user_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The user's newest tasks, newest first (at most `limit`, at most USER_TASKS_KEPT): each task's status
        record without its job and result (kind, status, error, progress, times). Tasks whose record expired are
        left out; a record of another user (never written so) is too."""
        async def run() -> list[dict[str, Any]]:
            ids = [raw.decode() for raw in await self._redis.zrevrange(self.keys.user_tasks(user_id), 0, limit - 1)]
            raws = await self._redis.mget([self.keys.task(tid) for tid in ids]) if ids else []
            out = []
            for tid, raw in zip(ids, raws, strict=True):
                rec = json.loads(raw) if raw is not None else None
                if rec is None or rec.get("user_id") != user_id:
                    continue
                out.append({"task_id": tid, "kind": rec.get("kind"), "status": rec.get("status"),
                            "error": rec.get("error"), "progress": rec.get("progress"), "retry": rec.get("retry"),
                            "created_at": rec.get("created_at"), "updated_at": rec.get("updated_at")})
            return out

        return await self._guard("recent tasks", run())

    async def record(self, task_id: str) -> dict[str, Any] | None:
        raw = await self._guard("status", self._redis.get(self.keys.task(task_id)))
        return json.loads(raw) if raw is not None else None

    async def _update(self, task_id: str, **changes: Any) -> dict[str, Any]:
        async def run() -> dict[str, Any]:
            rec = self._changed(task_id, await self._redis.get(self.keys.task(task_id)), changes)
            await self._redis.set(self.keys.task(task_id), json.dumps(rec),
                                  ex=self._settings.task_ttl_seconds)
            return rec

        return await self._guard("status update", run())

    @staticmethod
    def _changed(task_id: str, raw: bytes | None, changes: dict[str, Any]) -> dict[str, Any]:
        rec: dict[str, Any] = json.loads(raw) if raw else {"task_id": task_id, "created_at": now_iso()}
        rec.update(changes, updated_at=now_iso())
        return rec

    async def mark_processing(self, task_id: str, attempt: int, lease_token: str | None = None) -> bool:
        """The record's status, and the job's lease when a token is given (hold_lease): two round trips.
        False, and nothing written, when the record has ended already: this is a second run of a job whose end
        was recorded (its worker stalled past its lease and the reaper released the job, or the final write
        reached Redis but its answer did not reach the worker), and a completed task must not go back to
        `processing` nor its work run again.

        With REDIS_WAIT_REPLICAS (Sentinel), the claim is a replicated write too: True only once that many
        replicas hold it (Redis WAIT after the writes, on their connection), tried again for up to CLAIM_HOLD_S,
        then DependencyUnavailable (the job is retried). Replication keeps its order, so a claim on the replicas
        means the task's accept is there as well: a job never writes memories from a primary whose copy of the
        task a failover can lose (the primary killed before it replicated the accept, a restarted primary that the
        sentinels have not demoted yet), which a client's retry of its 503 would then write a second time."""
        replicas = self._wait_replicas

        async def run() -> tuple[bool, int]:
            raw = await self._redis.get(self.keys.task(task_id))
            if raw is not None and json.loads(raw).get("status") in ENDED:
                return False, 0
            rec = self._changed(task_id, raw, {"status": TaskStatus.PROCESSING.value, "attempt": attempt})
            pipe = self._redis.pipeline(transaction=False)
            if lease_token is not None:
                pipe.set(self.keys.lease(task_id), lease_token, ex=self._settings.task_lease_seconds)
            pipe.set(self.keys.task(task_id), json.dumps(rec), ex=self._settings.task_ttl_seconds)
            if replicas:
                pipe.execute_command("WAIT", replicas, self._wait_ms)
            out = await pipe.execute()
            return True, int(out[-1]) if replicas else 0

        deadline = time.monotonic() + CLAIM_HOLD_S
        for _ in range(int(CLAIM_HOLD_S * 1000 / self._wait_ms) + 1):  # bounded in count and in time
            started, acked = await self._guard("status update", run(), scale=2 if replicas else 1)
            if not started or acked >= replicas:
                return started
            log.warning("claim_not_replicated", acked=acked, wanted=replicas)
            if time.monotonic() >= deadline:
                break
        raise DependencyUnavailable(f"redis: the job's claim reached fewer than {replicas} replica(s) in "
                                    f"{CLAIM_HOLD_S:.0f} s; not run")

    async def mark_retrying(self, task_id: str, attempt: int, dependency: str, reason: str, defer_s: float) -> float:
        """The task waits on a slow or absent dependency and runs again in `defer_s`: status `retrying` with why and
        when (`retry`). Returns when the task first met one (epoch seconds: the budget's start, kept across attempts
        in `retry.since`). An ended task is left as it is."""
        async def run() -> float:
            raw = await self._redis.get(self.keys.task(task_id))
            rec = json.loads(raw) if raw else None
            now = time.time()
            if rec is None or rec.get("status") in ENDED:
                return now
            since = _epoch((rec.get("retry") or {}).get("since")) or now
            rec = self._changed(task_id, raw, {"status": TaskStatus.RETRYING.value, "retry": {
                "dependency": dependency, "reason": reason, "attempt": attempt, "since": _iso(since),
                "next_at": _iso(now + defer_s)}})
            await self._redis.set(self.keys.task(task_id), json.dumps(rec), keepttl=True)
            return since

        return await self._guard("status update", run())

    async def mark_completed(self, task_id: str, result: dict[str, Any]) -> None:
        # The job's copy (for the reaper) and its step caches go: a delete must find the content only in
        # `result`, where erase() can reach it through <queue>:mtasks:<memory id>.
        memories = [m["id"] for m in result.get("memories") or [] if isinstance(m, dict) and m.get("id")]
        await self._end(task_id, {"status": TaskStatus.COMPLETED.value, "result": result, "error": None, "job": None,
                                  "retry": None},
                        self._settings.idempotency_window_seconds, memories)

    async def mark_failed(self, task_id: str, error: str) -> None:
        # A failed task's idempotency pointer goes at once: an identical resubmission is a fresh write.
        await self._end(task_id, {"status": TaskStatus.FAILED.value, "error": error[:2000], "job": None}, 0, [])

    async def _end(self, task_id: str, changes: dict[str, Any], window: int, memory_ids: list[str]) -> None:
        """The final record and everything that goes with it (_FINISH), the job's lease included: two round trips."""
        async def run() -> None:
            rec = self._changed(task_id, await self._redis.get(self.keys.task(task_id)), changes)
            idem_key = rec.get("idem_key")
            steps = [self.keys.task_step(task_id, step) for step in STEPS]
            await self._finish_script(
                keys=[self.keys.task(task_id), self.keys.pending, idem_key or self.keys.accepted_prefix,
                      self.keys.lease(task_id), *steps,
                      *(self.keys.memory_tasks(m) for m in memory_ids)],
                args=[json.dumps(rec), self._settings.task_ttl_seconds, task_id, window, len(steps),
                      "1" if idem_key else "0"])

        await redis_settle(self._settings, "finish", run)  # idempotent: the same record and script again

    async def set_graph_state(self, task_id: str, state: str) -> bool:
        """The reconciler landed (or gave up on) a completed task's graph half: `result.graph` says so."""
        rec = await self.record(task_id)
        if rec is None or rec.get("status") != TaskStatus.COMPLETED.value or not isinstance(rec.get("result"), dict):
            return False
        result = dict(rec["result"])
        result["graph"] = state
        await self._update(task_id, result=result)
        return True

    async def set_progress(self, task_id: str, done: int, total: int) -> None:
        """What a long task reports while it runs (task status `progress`)."""
        await self._update(task_id, progress={"done": done, "total": total})



def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def _epoch(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else None
    except ValueError:
        return None
