"""After a change of WORKER_SHARDS: the jobs still waiting on another shard count's queues move to their shard's
queue under this count (service/tasks/shards.py), so each still runs once, and in the worker that holds its user.

`rehome` runs in the reconcile tick (worker/crons.py: once per deployment, RECONCILE_INTERVAL_SECONDS). A move is
one script per job: out of the old queue and into the new one with its score (its due time) only if it is still
in the old queue and no worker has claimed it (ARQ's in-progress key); a job running under the old layout ends
where it is. ARQ's job key (`arq:job:<id>`) does not name a queue, so nothing else changes. Once no queue of an
older count holds a job, the older counts are forgotten, and the tick costs one ZRANGE per queue again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, job_key_prefix
from arq.jobs import DeserializationError, deserialize_job

from service.core.kv import aw, redis_guard
from service.core.redis_client import job_deserializer
from service.core.settings import RedisQueueSettings
from service.tasks.shards import counts_key, queue_name, queue_names, shard_of

log = structlog.get_logger(__name__)

# KEYS: the old queue, the new queue, the job's in-progress key. ARGV: job id. Returns 1 when moved.
_MOVE = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], score, ARGV[1])
return 1
"""


@dataclass
class Rehomed:
    moved: int = 0
    running_elsewhere: int = 0  # claimed by a worker of the old layout: they end there
    scanned: int = 0
    counts_forgotten: list[int] = field(default_factory=list)


def _user_of(raw: bytes) -> str | None:
    """The user of a queued job (our jobs' args are (task_id, payload)); None for a cron or a foreign job."""
    try:
        args = deserialize_job(raw, deserializer=job_deserializer).args
    except DeserializationError:  # a job this code cannot read: ARQ's worker reports it; here it is shard 0's
        return None
    payload: Any = args[1] if len(args) > 1 else None
    user = payload.get("user_id") if isinstance(payload, dict) else None
    return str(user) if user else None


async def rehome(redis: ArqRedis, settings: RedisQueueSettings, *, limit: int = 1000) -> Rehomed:
    """Move the waiting jobs of every queue that is not their shard's under WORKER_SHARDS (at most `limit` looked
    at per queue per call: the next tick goes on)."""
    return await redis_guard(settings, "rehome", _rehome(redis, settings, limit), scale=10)


async def _rehome(redis: ArqRedis, settings: RedisQueueSettings, limit: int) -> Rehomed:
    base, shards = settings.queue_name, settings.worker_shards
    known = {int(c) for c in await aw(redis.smembers(counts_key(base))) if c.isdigit()} | {shards}
    current = queue_names(base, shards)
    older = [c for c in sorted(known) if c != shards]
    # The queues of older counts (and the one queue of a deployment from before shards, ARQ_QUEUE_NAME), then
    # this count's own queues while an older count is known (a user's jobs may sit on another shard's queue).
    queues = [q for q in dict.fromkeys([*(q for c in older for q in queue_names(base, c)), base]) if q not in current]
    if older:
        queues += current
    move = redis.register_script(_MOVE)
    out = Rehomed()
    complete = True
    for queue in queues:
        entries = await redis.zrange(queue, 0, limit - 1)
        complete = complete and len(entries) < limit
        pipe = redis.pipeline(transaction=False)
        for raw_id in entries:
            pipe.get(job_key_prefix + raw_id.decode())
        for raw_id, raw in zip(entries, await pipe.execute() if entries else [], strict=True):
            job_id = raw_id.decode()
            out.scanned += 1
            if raw is None:
                continue  # expired or ending: ARQ's worker drops its id
            target = queue_name(base, shard_of(_user_of(raw), shards), shards)
            if target == queue:
                continue
            if await move(keys=[queue, target, in_progress_key_prefix + job_id], args=[job_id]):
                out.moved += 1
            else:
                out.running_elsewhere += 1
    if older and complete and out.running_elsewhere == 0 and not out.moved:
        pipe = redis.pipeline(transaction=True)  # nothing of theirs waits any more
        pipe.sadd(counts_key(base), shards)
        pipe.srem(counts_key(base), *older)
        await pipe.execute()
        out.counts_forgotten = older
    if out.moved or out.counts_forgotten:
        log.warning("shard_jobs_rehomed", moved=out.moved, running_elsewhere=out.running_elsewhere,
                    shards=shards, counts_forgotten=out.counts_forgotten)
    return out
