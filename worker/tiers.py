"""The retention cron of the runs and conversations tiers (their job kinds are in service/tasks/registry.py)."""

from __future__ import annotations

from typing import Any

import structlog

from service.conversations.writes import expire_tiers
from service.core.errors import DependencyUnavailable
from service.deps import Deps

log = structlog.get_logger(__name__)


async def tier_retention_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """Daily: messages older than MESSAGE_RETENTION_DAYS and runs older than RUN_RETENTION_DAYS are erased."""
    deps: Deps = ctx["deps"]
    try:
        return await expire_tiers(deps.settings.retention, deps.graph)
    except DependencyUnavailable as exc:
        log.warning("tier_retention_failed", error=str(exc)[:300])
        return None
