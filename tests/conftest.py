"""Shared test helpers. Integration services come from scripts/test.sh (TEST_* variables)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from service.settings import Settings


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_settings(tmp: Path, **overrides: Any) -> Settings:
    """Settings for a test app: own queue, own Qdrant dir, hash embedder, test Redis/Neo4j."""
    base: dict[str, Any] = {
        "redis_url": os.environ.get("TEST_REDIS_URL", ""),
        "neo4j_uri": os.environ.get("TEST_NEO4J_URI", ""),
        "neo4j_database": os.environ.get("TEST_NEO4J_DATABASE", "memory"),
        "neo4j_password": None,
        "data_dir": tmp,
        "qdrant_path": tmp / "qdrant",
        "arq_queue_name": unique("test:queue"),
        "embedder": "hash",
        "log_format": "console",
        "log_level": "WARNING",
        "arq_job_timeout": 30,
        "dedup_cron_enabled": False,  # a session crossing 00/06/12/18 UTC must not sweep shared apps
        "reconcile_cron_enabled": False,
        "reconcile_interval_seconds": 2,  # the outbox drain and the reaper, fast enough to wait for
        "reconcile_grace_seconds": 1,
    }
    base.update(overrides)
    return Settings(_env_file=None, **base)  # type: ignore[call-arg]
