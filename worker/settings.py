"""ARQ worker options shared by the standalone worker and the in-process (embedded) one."""

from __future__ import annotations

from typing import Any

from arq.worker import func

from service.queue import JOB_FUNCTION, job_deserializer, job_serializer, redis_settings
from service.settings import Settings
from worker.dedup import dedup_cron_jobs
from worker.jobs import process_memory_write


def worker_options(settings: Settings) -> dict[str, Any]:
    return {
        "functions": [func(process_memory_write, name=JOB_FUNCTION, max_tries=settings.arq_max_retries)],
        # The dedup sweep at DEDUP_CRON_HOURS (on-demand runs are "dedup" tasks of the function above).
        "cron_jobs": dedup_cron_jobs(settings),
        "redis_settings": redis_settings(settings),
        "queue_name": settings.arq_queue_name,
        "max_jobs": settings.arq_max_jobs,
        "poll_delay": settings.arq_poll_delay_seconds,
        "job_timeout": settings.arq_job_timeout,
        "max_tries": settings.arq_max_retries,
        # Our status records live in mem:task:*; ARQ's own result is not needed for long.
        "keep_result": 60,
        "job_serializer": job_serializer,
        "job_deserializer": job_deserializer,
        "health_check_interval": 30,
    }
