"""ARQ worker options shared by the standalone worker and the in-process (embedded) one."""

from __future__ import annotations

from typing import Any

from arq.worker import func

from service.queue import job_deserializer, job_serializer, redis_settings
from service.settings import Settings
from worker.crons import cron_jobs
from worker.jobs import JOB_FUNCTIONS
from worker.tiers import TIER_FUNCTIONS


def worker_options(settings: Settings) -> dict[str, Any]:
    return {
        "functions": [func(fn, name=name, max_tries=settings.arq_max_retries)
                      for name, fn in {**JOB_FUNCTIONS, **TIER_FUNCTIONS}.items()],
        "cron_jobs": cron_jobs(settings),
        "redis_settings": redis_settings(settings),
        "queue_name": settings.arq_queue_name,
        "max_jobs": settings.arq_max_jobs,
        "poll_delay": settings.arq_poll_delay_seconds,
        "job_timeout": settings.arq_job_timeout,
        "max_tries": settings.arq_max_retries,
        # Our status records live in <queue>:task:*. ARQ's own result would keep the job's arguments
        # (the memory's content) after a delete: none is kept.
        "keep_result": 0,
        "job_serializer": job_serializer,
        "job_deserializer": job_deserializer,
        "health_check_interval": 30,
    }
