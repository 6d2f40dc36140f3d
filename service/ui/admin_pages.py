"""The console's operator pages: activity (recent tasks, maintenance runs and their reports, a dedup dry run),
health (with a few of /metrics' counters), API keys (admin only)."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.core.auth import ApiKeyStore
from service.core.loop import describe
from service.deps import Deps
from service.schemas.maintenance import DedupRequest
from service.ui.render import RECENT_TASKS, call, console_router, follow, render, valid_user
from service.ui.session import (
    Console,
    ConsoleDep,
    form_of,
)
from service.ui.words import duration

router = console_router()


# --- activity, health, keys ---------------------------------------------------------------------------------------

@router.get("/activity", response_class=HTMLResponse)
async def activity(request: Request, console: ConsoleDep) -> Response:
    """The user's recent tasks (status, error, a link to each task's page); maintenance runs (dedup, reconcile)
    with their reports: all of them for an admin, the user's otherwise."""
    owner = None if console.admin else console.acting()
    tasks = await call(console.deps.tasks.records.recent(console.acting(), RECENT_TASKS))
    runs = await call(console.deps.maintenance.records.recent(50, only_user=owner))
    return render(request, "activity.html", console, tasks=tasks, runs=runs,
                  task_ttl=duration(console.deps.settings.redis.task_ttl_seconds))


@router.get("/activity/{run_id}", response_class=HTMLResponse)
async def run_report(request: Request, run_id: str, console: ConsoleDep) -> Response:
    report = await call(console.deps.maintenance.records.get(run_id))
    if not console.admin and report.user_id != console.acting():
        raise HTTPException(status_code=404, detail=f"unknown maintenance run '{run_id}'")
    return render(request, "run.html", console, report=report,
                  body=json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False))


@router.post("/activity/dedup")
async def start_dedup(request: Request, console: ConsoleDep) -> Response:
    """Admin only: a dedup dry run for the session's user; the task page follows its progress."""
    if not console.admin:
        raise HTTPException(status_code=403, detail="a dedup run needs an admin key")
    accepted = await call(console.deps.maintenance.submit_dedup(DedupRequest(user_id=console.acting(), dry_run=True)))
    return follow(accepted.task_id, f"/ui/activity/{accepted.run_id}")


@router.get("/health", response_class=HTMLResponse)
async def health(request: Request, console: ConsoleDep) -> Response:
    """/health's own answer (service/memory/health.py), the user's graph figures, key counters."""
    await console.deps.backlog.refresh_gauges()  # as /metrics does before it answers
    report = await console.deps.health.report(console.admin or console.caller.admin)
    body = report.model_dump(mode="json", exclude_none=True)
    stats = await call(console.deps.curation.graph_stats(console.acting(), None))
    figures = {k: v for k, v in stats.model_dump().items() if k != "status"}
    write_path = dict(body.get("write_path") or {})
    write_path["loops"] = [describe(r) for r in write_path.get("loops", [])]  # each process's event loop
    return render(request, "health.html", console, health=body, ok=report.status == "ok",
                  write_path=_readable(write_path), graph=_readable(figures),
                  counters=[(_breakable(name), value) for name, value in _counters(console.deps)])


def _readable(values: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows for a person: words for the keys, a nested figure spelled out ("pending 0, ...")."""
    def text(value: Any) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k.replace('_', ' ')} {text(v)}" for k, v in value.items()) or "—"
        if isinstance(value, list):  # the event loops, one described process each
            return "; ".join(text(v) for v in value) or "—"
        return "—" if value is None else str(value)

    return [(k.replace("_", " "), text(v)) for k, v in values.items()]


def _breakable(name: str) -> list[str]:
    """A metric's name in the pieces a line may break after (after `_`, `{`, `,`): never inside a word."""
    return [p for p in re.split(r"(?<=[_{,])", name) if p]


def _counters(deps: Deps) -> list[tuple[str, float]]:
    """A few of /metrics' counters, read from the same registry /metrics exposes."""
    from prometheus_client import REGISTRY

    wanted = ("memory_jobs", "memory_search", "memory_dedup", "memory_reconcile", "memory_outbox", "memory_queue")
    out: list[tuple[str, float]] = []
    for family in REGISTRY.collect():
        if family.name.startswith(wanted):
            for sample in family.samples:
                if sample.name.endswith(("_total", "_depth", "_age_seconds", "_count")):
                    labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                    out.append((sample.name + (f"{{{labels}}}" if labels else ""), sample.value))
    return out[:60]


@router.get("/keys", response_class=HTMLResponse)
async def keys(request: Request, console: ConsoleDep) -> Response:
    _admin(console)
    listed = await call(ApiKeyStore(console.deps.redis, console.deps.settings.redis).list())
    return render(request, "keys.html", console, keys=listed, secret=None)


@router.post("/keys", response_class=HTMLResponse)
async def create_key(request: Request, console: ConsoleDep) -> Response:
    """The new key's secret is shown once, in this answer only."""
    _admin(console)
    form = await form_of(request)
    user = valid_user(form.get("user_id", "").strip())
    store = ApiKeyStore(console.deps.redis, console.deps.settings.redis)
    record, secret = await call(store.create(user, (form.get("name") or "")[:128] or None, form.get("admin") == "on"))
    response = render(request, "keys.html", console, keys=await call(store.list()), secret=secret, created=record)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/keys/{key_id}/revoke")
async def revoke_key(key_id: str, console: ConsoleDep) -> Response:
    _admin(console)
    await call(ApiKeyStore(console.deps.redis, console.deps.settings.redis).revoke(key_id))
    return RedirectResponse("/ui/keys", status_code=303)


def _admin(console: Console) -> None:
    """The keys need an admin session: an admin key, or AUTH_MODE=none (loopback), where the console is an admin
    session everywhere, as the API is (docs/console.md, "Who is admin")."""
    if not console.admin:
        raise HTTPException(status_code=403, detail="managing keys needs an admin key")
