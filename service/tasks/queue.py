"""Enqueue memory writes in ARQ and keep their status records in Redis.

Keys (prefixed with ARQ_QUEUE_NAME, so deployments sharing one Redis stay apart):
- `<queue>:task:<task_id>`   JSON status record (with the job, so the reaper can re-enqueue it), lives
  TASK_TTL_SECONDS.
- `<queue>:pending`          sorted set of the tasks not ended yet (score = acceptance time, ms): what
  the reaper looks at.
- `<queue>:lease:<task_id>`  held (with a short TTL, refreshed) while a worker runs the job: a job whose
  lease lapsed while ARQ still marks it in progress belongs to a dead worker.
- `<queue>:idem:<req_hash>`  the task id that answers identical requests; lives while the task is
  pending, then IDEMPOTENCY_WINDOW_SECONDS after it finished (so retries share a task, history
  does not). Its lifetime is independent of both the status record and ARQ's job/result keys.
- `<queue>:utasks:<user_id>` sorted set of the user's task ids (score = acceptance time, µs), the newest
  USER_TASKS_KEPT, written by the accept script itself (so it cannot drift from the records), expiring with
  TASK_TTL_SECONDS after the user's last write; `recent()` reads it (the console's Activity page).

ARQ's own queue (the sorted set workers poll) is ARQ_QUEUE_NAME with WORKER_SHARDS=1, else the queue of the
user's shard (service/tasks/shards.py); every key above stays under ARQ_QUEUE_NAME, so a task reads the same whatever
shard runs it.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import structlog
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix, retry_key_prefix
from arq.jobs import serialize_job

from service.core.domain import ID_NAMESPACE, TaskStatus, now_iso
from service.core.errors import DependencyUnavailable, NotFound
from service.core.keys import Keys
from service.core.kv import STEPS, aw, redis_guard, redis_settle
from service.core.redis_client import job_serializer
from service.core.settings import RedisQueueSettings
from service.tasks.jobs import JobModel
from service.tasks.scripts import ACCEPT, FINISH
from service.tasks.shards import queue_name, queue_names, shard_of
from service.tasks.status import TaskResponse

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

# With REDIS_WAIT_REPLICAS, how long a job's claim waits for the replicas before the job is retried (mark_processing).
CLAIM_HOLD_S = 10.0
# Attempts of a task that its worker's stop or death interrupted and that are not tries (forgive_interruption).
INTERRUPTIONS_FORGIVEN = 10
ENDED = (TaskStatus.COMPLETED.value, TaskStatus.FAILED.value)
USER_TASKS_KEPT = 200  # the newest task ids kept in a user's index (<queue>:utasks:<user>)

def request_hash(kind: str, fields: dict[str, Any]) -> str:
    canonical = json.dumps({"kind": kind, **fields}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


class TaskQueue:
    """The API side of writes (enqueue, poll) and the worker side of status updates."""

    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings, functions: Mapping[str, str]) -> None:
        """`functions`: the ARQ function of each job kind (service/registry.py)."""
        self._redis = redis
        self._settings = settings
        self._functions = functions
        self._accept = redis.register_script(ACCEPT)
        self._finish_script = redis.register_script(FINISH)
        self.keys = Keys(settings.queue_name)
        self.pending_key = self.keys.pending

    @property
    def redis(self) -> ArqRedis:
        return self._redis

    def key(self, name: str) -> str:
        """A Redis key in this deployment's namespace (`<queue>:<name>`)."""
        return self.keys.of(name)

    def lease_key(self, task_id: str) -> str:
        """Held while a worker runs the task's job (TASK_LEASE_SECONDS, refreshed); the reaper reads it."""
        return self.keys.lease(task_id)

    async def _guard(self, what: str, coro: Awaitable[_T], scale: float = 1.0) -> _T:
        return await redis_guard(self._settings, what, coro, scale=scale)

    async def enqueue(self, job: JobModel, identity: dict[str, Any], *, user_id: str | None = None) -> str:
        """Accept a write: returns the task id (an existing one for a retried identical request)."""
        return await self._guard("enqueue", self._enqueue(job, identity, user_id))

    async def _enqueue(self, job: JobModel, identity: dict[str, Any], user_id: str | None) -> str:
        req = request_hash(job.kind, identity)
        idem_key = self.keys.accepted(req)
        accepted_at = now_iso()
        task_id = uuid.uuid5(ID_NAMESPACE, f"{req}:{time.time_ns()}").hex
        ttl = self._settings.task_ttl_seconds
        job = job.model_copy(update={"accepted_at": accepted_at})
        payload = job.model_dump(mode="json")
        record = {
            "task_id": task_id,
            "kind": job.kind,
            "status": TaskStatus.QUEUED.value,
            "result": None,
            "error": None,
            "user_id": user_id or getattr(job, "user_id", None),
            "idem_key": idem_key,
            "created_at": accepted_at,
            "updated_at": accepted_at,
            "attempt": 0,
            "job": payload,
        }
        # One script, so a crash leaves all of it or none: a retried request finds the live task its pointer
        # names; otherwise the record, the pending entry (the reaper's list), the pointer and the ARQ job.
        now_ms = int(time.time() * 1000)
        serialized = serialize_job(self._functions[job.kind], (task_id, payload), {}, None, now_ms,
                                   serializer=job_serializer)
        owner = str(record["user_id"] or "") or None
        keys = [self.keys.task(task_id), self.pending_key, idem_key, job_key_prefix + task_id,
                result_key_prefix + task_id, self.queue_of(owner), self.keys.shard_counts,
                self.user_tasks_key(owner or "")]
        args: list[Any] = [json.dumps(record), now_ms, task_id, ttl, serialized, ttl * 1000, now_ms,
                           self.keys.task_prefix,
                self._settings.worker_shards, USER_TASKS_KEPT if owner else 0, time.time_ns() // 1000]
        replicas = self._wait_replicas
        if replicas:
            existing = await self._accept_replicated(keys, args, replicas)
        else:
            existing = await self._accept(keys=keys, args=args)
        if existing is not None:
            log.info("task_deduplicated", task_id=existing.decode())
            return str(existing.decode())
        log.info("task_enqueued", task_id=task_id, kind=job.kind)
        return task_id

    @property
    def _wait_replicas(self) -> int:
        """REDIS_WAIT_REPLICAS, which applies with Sentinel only (a lone Redis has no replicas to wait for)."""
        return self._settings.wait_replicas if self._settings.sentinels else 0

    @property
    def _wait_ms(self) -> int:
        return max(1, int(self._settings.timeout_seconds * 500))

    async def _accept_replicated(self, keys: list[str], args: list[Any], replicas: int) -> bytes | None:
        """The accept script, then Redis WAIT on the same connection: answered only once `replicas` replicas hold
        the write, so a failover cannot lose an acknowledged task. Fewer in time: 503, and the client's retry of
        the same request finds this task through its idempotency pointer (it is not accepted twice)."""
        wait_ms = self._wait_ms
        pipe = self._redis.pipeline(transaction=False)
        await self._accept(keys=keys, args=args, client=pipe)
        pipe.execute_command("WAIT", replicas, wait_ms)
        existing, acked = await pipe.execute()
        if int(acked) < replicas:
            log.warning("accept_not_replicated", acked=int(acked), wanted=replicas, wait_ms=wait_ms)
            raise DependencyUnavailable(f"redis: the write reached {acked} of {replicas} replica(s) in {wait_ms} ms")
        return cast(bytes | None, existing)

    def queue_of(self, user_id: str | None) -> str:
        """The ARQ queue of a user's jobs (the queue of the user's shard; service/tasks/shards.py)."""
        shards = self._settings.worker_shards
        return queue_name(self._settings.queue_name, shard_of(user_id, shards), shards)

    async def _submit(self, task_id: str, job: dict[str, Any], job_try: int | None = None,
                      user_id: str | None = None) -> bool:
        submitted = await self._redis.enqueue_job(
            self._functions[job["kind"]], task_id, job, _job_id=task_id, _expires=self._settings.task_ttl_seconds,
            _job_try=job_try, _queue_name=self.queue_of(user_id or job.get("user_id")),
        )
        return submitted is not None

    async def status(self, task_id: str, owner: str | None = None) -> TaskResponse:
        """A task's status; a task of another user than `owner` (when given) is unknown (404)."""
        rec = await self.record(task_id)
        if rec is None or (owner is not None and rec.get("user_id") != owner):
            raise NotFound(f"unknown task id '{task_id}' (task records expire after TASK_TTL_SECONDS)")
        return TaskResponse(task_id=task_id, status=rec["status"], result=rec["result"], error=rec["error"],
                            progress=rec.get("progress"), retry=rec.get("retry"))

    def user_tasks_key(self, user_id: str) -> str:
        """The user's task index: their newest task ids by acceptance time (written by the accept script)."""
        return self.keys.user_tasks(user_id)

    async def recent(self, user_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The user's newest tasks, newest first (at most `limit`, at most USER_TASKS_KEPT): each task's status
        record without its job and result (kind, status, error, progress, times). Tasks whose record expired are
        left out; a record of another user (never written so) is too."""
        async def run() -> list[dict[str, Any]]:
            ids = [raw.decode() for raw in await self._redis.zrevrange(self.user_tasks_key(user_id), 0, limit - 1)]
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
                pipe.set(self.lease_key(task_id), lease_token, ex=self._settings.task_lease_seconds)
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

    async def erase(self, memory_ids: list[str]) -> int:
        """Deleting erases: the content of these memories leaves every task record that holds it (the
        results of the writes and updates that stored them). Returns the records changed."""
        async def run() -> int:
            changed = 0
            for mid in memory_ids:
                key = self.keys.memory_tasks(mid)
                for raw_tid in await aw(self._redis.smembers(key)):
                    tid = raw_tid.decode()
                    raw = await self._redis.get(self.keys.task(tid))
                    if raw is None:
                        continue
                    rec = json.loads(raw)
                    result = rec.get("result") if isinstance(rec.get("result"), dict) else {}
                    for m in result.get("memories") or []:
                        if isinstance(m, dict) and m.get("id") == mid:
                            m["content"] = None
                            m["deleted"] = True
                    rec.pop("job", None)
                    ttl = await self._redis.ttl(self.keys.task(tid))
                    await self._redis.set(self.keys.task(tid), json.dumps(rec),
                                          ex=ttl if ttl and ttl > 0 else self._settings.task_ttl_seconds)
                    changed += 1
                await self._redis.delete(key)
            return changed

        return await self._guard("erase", run())

    async def erase_user(self, user_id: str) -> int:
        """A delete of everything of the user: every ended task of theirs keeps its status and times but not what
        it held of the user's words (its job, its result, its error's text). Every task record is looked at (a
        SCAN: the user's index keeps only the newest USER_TASKS_KEPT). Returns the records changed."""
        async def scrub(keys: list[bytes]) -> int:
            n = 0
            keys = [k for k in keys if b":" not in k[len(self.keys.task_prefix):]]  # not the jobs' step caches
            for key, raw in zip(keys, await self._redis.mget(keys) if keys else [], strict=True):
                rec = json.loads(raw) if raw is not None and raw.startswith(b"{") else None
                if not isinstance(rec, dict) or rec.get("user_id") != user_id or rec.get("status") not in ENDED:
                    continue  # another user's, not ended, or not a status record (a job's step cache)
                rec.pop("job", None)
                rec["result"] = {"erased": True} if rec.get("result") is not None else None
                rec["error"] = "erased with the user's data" if rec.get("error") else None
                ttl = await self._redis.ttl(key)
                await self._redis.set(key, json.dumps(rec),
                                      ex=ttl if ttl and ttl > 0 else self._settings.task_ttl_seconds)
                n += 1
            return n

        changed, cursor = 0, 0
        for _ in range(10_000_000):  # bounded; each step guarded on its own
            cursor, keys = await self._guard("erase", self._redis.scan(cursor, match=self.keys.task_prefix + "*",
                                                                       count=1000))
            if keys:
                changed += await self._guard("erase", scrub(keys), scale=4)
            if not cursor:
                break
        return changed

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
                keys=[self.keys.task(task_id), self.pending_key, idem_key or self.keys.accepted_prefix,
                      self.lease_key(task_id), *steps,
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

    # ---- leases and the reaper ----------------------------------------------------------------

    async def hold_lease(self, task_id: str, token: str) -> None:
        await self._guard("lease", self._redis.set(self.lease_key(task_id), token,
                                                       ex=self._settings.task_lease_seconds))

    async def drop_lease(self, task_id: str) -> None:
        await self._guard("lease", self._redis.delete(self.lease_key(task_id)))

    async def pending_count(self) -> int:
        return int(await self._guard("pending", self._redis.zcard(self.pending_key)))

    async def queued_jobs(self) -> int:
        """Jobs in ARQ's queues (waiting or deferred), every shard's."""
        async def run() -> int:
            pipe = self._redis.pipeline(transaction=False)
            for name in queue_names(self._settings.queue_name, self._settings.worker_shards):
                pipe.zcard(name)
            return sum(int(n) for n in await pipe.execute())

        return await self._guard("queue depth", run())

    async def oldest_pending_age_s(self) -> float:
        first = aw(self._redis.zrange(self.pending_key, 0, 0, withscores=True))
        oldest: list[Any] = await self._guard("pending", first)
        return max(0.0, time.time() - oldest[0][1] / 1000) if oldest else 0.0

    async def is_pending(self, task_id: str) -> bool:
        return await self._guard("pending", self._redis.zscore(self.pending_key, task_id)) is not None

    async def reap(self, *, older_than_s: float = 30.0, limit: int = 1000) -> dict[str, int]:
        """Tasks not ended whose ARQ job is gone or belongs to a dead worker.

        - job gone (ARQ ended it without our code: its worker died on the last try, or the job vanished
          from Redis): re-enqueued while tries remain, else failed with `lost: ...`;
        - job still marked in progress by ARQ but its lease lapsed (the worker was killed): ARQ's
          in-progress mark is dropped so the job runs again now instead of after ARQ_JOB_TIMEOUT.
        """
        counts = {"requeued": 0, "failed": 0, "released": 0, "ended": 0, "discarded": 0}
        cutoff = (time.time() - older_than_s) * 1000
        ids = await self._guard("reap", self._redis.zrangebyscore(self.pending_key, 0, cutoff, start=0, num=limit))
        for raw_id in ids:
            task_id = raw_id.decode()
            outcome: str | None = await self._guard("reap", self._reap_one(task_id))
            if outcome:
                counts[outcome] += 1
        if any(counts.values()):
            log.warning("reaper_ran", **counts)
        return counts

    async def forgive_interruption(self, task_id: str) -> bool:
        """An attempt that ended because its worker stopped (its close cancelled the job) or died (the reaper found
        its lease lapsed) is not one of the job's tries: ARQ's try counter for the job goes back by one. Tries are
        for the job's own failures; without this, a service restarted a few times in a row (a crash loop, a rolling
        restart) failed jobs that never failed, with their memories already stored. At most INTERRUPTIONS_FORGIVEN
        a task (counted in its record's `interrupted`), so a job that kills its worker every time still ends. False,
        and nothing changed, when the task has ended or used its allowance."""
        forgiven = await self._guard("forgive", self._forgive(task_id))
        if forgiven:
            log.info("attempt_forgiven", task_id=task_id)
        return forgiven

    async def _forgive(self, task_id: str) -> bool:
        raw = await self._redis.get(self.keys.task(task_id))
        rec: dict[str, Any] | None = json.loads(raw) if raw else None
        if rec is None or rec.get("status") in ENDED or int(rec.get("interrupted") or 0) >= INTERRUPTIONS_FORGIVEN:
            return False
        rec["interrupted"] = int(rec.get("interrupted") or 0) + 1
        tries = int(await self._redis.get(retry_key_prefix + task_id) or 0)
        pipe = self._redis.pipeline(transaction=False)
        pipe.set(self.keys.task(task_id), json.dumps(rec), keepttl=True)
        if tries > 0:
            pipe.decr(retry_key_prefix + task_id)
        await pipe.execute()
        return True

    async def _reap_one(self, task_id: str) -> str | None:
        raw = await self._redis.get(self.keys.task(task_id))
        rec: dict[str, Any] | None = json.loads(raw) if raw else None
        if rec is None or rec.get("status") in ENDED:
            await self._redis.zrem(self.pending_key, task_id)
            return "ended"
        lost = int(rec.get("lost") or 0)  # attempts lost with their worker, past the forgiven ones (the reaper's count)
        if await self._redis.exists(job_key_prefix + task_id):
            if (await self._redis.exists(in_progress_key_prefix + task_id)
                    and not await self._redis.exists(self.lease_key(task_id))
                    and _age_s(rec.get("updated_at")) > self._settings.task_lease_seconds):
                # Its worker died: that attempt was not a try. Forgiven first: once ARQ's mark is gone, another worker
                # may claim the job and write its record.
                forgiven = await self._forgive(task_id)
                if not forgiven and lost + 1 >= self._settings.max_tries:
                    log.error("reaper_failed_task", task_id=task_id, attempt=rec.get("attempt"), lost=lost + 1)
                    await self.mark_failed(task_id, f"lost: its worker died {lost + 1 + INTERRUPTIONS_FORGIVEN} times "
                                                    "while running it")
                    await self._redis.delete(in_progress_key_prefix + task_id, job_key_prefix + task_id)
                    return "failed"
                if not forgiven:
                    await self._redis.set(self.keys.task(task_id), json.dumps({**rec, "lost": lost + 1}),
                                          keepttl=True)
                await self._redis.delete(in_progress_key_prefix + task_id)
                log.warning("reaper_released_job", task_id=task_id, attempt=rec.get("attempt"), forgiven=forgiven)
                return "released"
            return None
        idem_key = rec.get("idem_key")
        if (idem_key and rec.get("status") == TaskStatus.QUEUED.value
                and await self._redis.get(idem_key) != task_id.encode()):
            await self._discard(task_id)  # accepted half-way by a process that died: never answered
            log.warning("reaper_discarded", task_id=task_id)
            return "discarded"
        attempt = int(rec.get("attempt") or 0)
        job = rec.get("job")
        if job is not None and lost + 1 < self._settings.max_tries:
            await self._redis.delete(result_key_prefix + task_id)
            await self._redis.set(self.keys.task(task_id), json.dumps({**rec, "lost": lost + 1}), keepttl=True)
            if await self._submit(task_id, job, job_try=attempt + 1, user_id=rec.get("user_id")):
                log.warning("reaper_requeued", task_id=task_id, attempt=attempt, lost=lost + 1)
                return "requeued"
            return None
        reason = (f"lost: the job ended without finishing {lost + 1} time(s), after {attempt} attempt(s) "
                  "(its worker died, or the job vanished from Redis)")
        log.error("reaper_failed_task", task_id=task_id, attempt=attempt, lost=lost + 1)
        await self.mark_failed(task_id, reason)
        return "failed"

    async def _discard(self, task_id: str) -> None:
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(self.keys.task(task_id))
        pipe.zrem(self.pending_key, task_id)
        await pipe.execute()

    async def ping(self) -> None:
        await self._guard("ping", self._redis.ping())


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def _epoch(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else None
    except ValueError:
        return None


def _age_s(stamp: Any) -> float:
    try:
        return (datetime.now(UTC) - datetime.fromisoformat(str(stamp))).total_seconds()
    except ValueError:
        return float("inf")
