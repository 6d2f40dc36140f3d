"""ARQ worker options shared by the standalone worker and the in-process (embedded) one."""

from __future__ import annotations

from typing import Any

from arq.worker import func

from service.core.redis_client import job_deserializer, job_serializer, redis_settings
from service.core.settings import Settings
from service.registry import JOB_KINDS
from service.tasks.shards import queue_name
from worker.crons import cron_jobs
from worker.jobs import arq_function


def worker_options(settings: Settings, shard: int = 0) -> dict[str, Any]:
    """The options of a worker of one shard's queue (service/tasks/shards.py); the workers of shard 0 also schedule the
    crons, so they run once per deployment whatever WORKER_SHARDS is."""
    return {
        "functions": [func(arq_function(k), name=k.function, max_tries=k.retry.tries(settings.redis.max_tries))
                      for k in JOB_KINDS],
        "cron_jobs": cron_jobs(settings) if shard == 0 else [],
        "redis_settings": redis_settings(settings.redis),
        "queue_name": queue_name(settings.redis.queue_name, shard, settings.redis.worker_shards),
        "max_jobs": settings.redis.max_jobs,
        "poll_delay": settings.redis.poll_delay_seconds,
        "job_timeout": settings.redis.job_timeout,
        "max_tries": settings.redis.max_tries,
        # Our status records live in <queue>:task:*. ARQ's own result would keep the job's arguments
        # (the memory's content) after a delete: none is kept.
        "keep_result": 0,
        "job_serializer": job_serializer,
        "job_deserializer": job_deserializer,
        "health_check_interval": 30,
    }
