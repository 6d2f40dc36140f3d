"""The worker's optimize cron starts the vector index build in the background once enough points are outside
the index, never two at once, and the store's close() cancels a build still running."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import unique
from tests.integration.conftest import running_app, write_raw
from worker.crons import optimize_cron


async def test_optimize_cron_builds_in_the_background(tmp_path: Path) -> None:
    async with running_app(tmp_path, optimize_min_unindexed=2) as (client, deps):
        user = unique("opt")
        for i in range(3):
            await write_raw(client, user_id=user, category="interaction", content=f"we met on day {i}")
        ctx: dict[str, Any] = {"deps": deps}
        started = await optimize_cron(ctx)
        assert started == {"backlog": 3, "started": True}
        assert await optimize_cron(ctx) is None  # one build at a time
        [build] = list(ctx["index_builds"])
        await asyncio.wait_for(build, 120)
        assert deps.vectors.last_optimize["points"] >= 3  # type: ignore[attr-defined]
        resp = await client.post("/v1/search", json={"user_id": user, "query": "day 1"})
        assert resp.status_code == 200 and len(resp.json()["results"]) == 3
    async with running_app(tmp_path / "below", optimize_min_unindexed=100) as (client, deps):
        await write_raw(client, user_id=unique("opt"), category="interaction", content="one memory")
        assert await optimize_cron({"deps": deps}) is None  # under the threshold: nothing to do
