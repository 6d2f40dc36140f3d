"""Operator commands of `python -m service`: they talk to the running API (`MEMORY_API_URL`, default
http://127.0.0.1:<PORT>, with `MEMORY_API_KEY` when set), because in the embedded profile the API process
holds the stores. Each exits 1 with one clear line when the API cannot be reached or refuses.

    python -m service dedup run [--user U] [--dry-run]   start a run and follow it to its end
    python -m service dedup runs [--limit N]             the latest dedup and reconcile runs
    python -m service reconcile [--user U] [--dry-run]   a full Qdrant <-> Neo4j reconcile, followed
    python -m service stats [--user U]                   health, write-path backlog (and a user's count)
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import httpx

from service.settings import Settings

FOLLOW_S = 3600.0  # how long a followed run is polled before giving up (the run goes on)
POLL_S = 1.0


class CliError(Exception):
    pass


class Api:
    def __init__(self, settings: Settings, timeout_s: float = 30.0) -> None:
        self.url = settings.memory_api_url or f"http://127.0.0.1:{settings.port}"
        key = settings.memory_api_key.get_secret_value() if settings.memory_api_key else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s, headers=headers)

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def call(self, method: str, path: str, *, accept: tuple[int, ...] = (), **kwargs: Any) -> Any:
        """The JSON answer; a status >= 400 not in `accept` is a CliError with the API's detail."""
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CliError(f"the memory API at {self.url} is not reachable ({type(exc).__name__}); start it "
                           "(./scripts/dev.sh or python -m service) or set MEMORY_API_URL") from exc
        if resp.status_code >= 400 and resp.status_code not in accept:
            try:
                detail = resp.json().get("detail", resp.text)
            except ValueError:
                detail = resp.text
            raise CliError(f"{method} {path}: {resp.status_code} {detail}")
        return resp.json()


def _follow(api: Api, task_id: str, run_id: str, out: Any) -> dict[str, Any]:
    """Poll a maintenance run until its task ends; one line per change of state."""
    deadline = time.monotonic() + FOLLOW_S
    last = ""
    for _ in range(int(FOLLOW_S / POLL_S) + 1):
        task = api.call("GET", f"/v1/memories/status/{task_id}")
        run = api.call("GET", f"/v1/maintenance/runs/{run_id}")
        line = _run_line(run)
        if line != last:
            print(line, file=out, flush=True)
            last = line
        if task["status"] in ("completed", "failed") or time.monotonic() > deadline:
            if task["status"] == "failed":
                raise CliError(f"run {run_id} failed: {task.get('error')}")
            return dict(run)
        time.sleep(POLL_S)
    return dict(run)


def _run_line(run: dict[str, Any]) -> str:
    t = run.get("totals") or {}
    base = f"{run.get('kind', 'dedup')} run {run['run_id']}: {run['status']}"
    if run.get("kind") == "reconcile":
        repairs = ", ".join(f"{k} {v}" for k, v in (run.get("repairs") or {}).items())
        return f"{base} ({repairs or 'no repairs yet'})"
    return (f"{base}: scanned {t.get('scanned', 0)}, exact removed {t.get('exact_removed', 0)}, "
            f"near removed {t.get('near_removed', 0)}, graph edges expired {t.get('graph_edges_expired', 0)}")


def dedup_run(settings: Settings, user: str | None, dry_run: bool, out: Any = sys.stdout) -> None:
    with Api(settings) as api:
        body = {k: v for k, v in {"user_id": user, "dry_run": dry_run}.items() if v is not None}
        accepted = api.call("POST", "/v1/maintenance/dedup", json=body)
        _follow(api, accepted["task_id"], accepted["run_id"], out)


def reconcile(settings: Settings, user: str | None, dry_run: bool, out: Any = sys.stdout) -> None:
    with Api(settings) as api:
        body = {k: v for k, v in {"user_id": user, "dry_run": dry_run}.items() if v is not None}
        accepted = api.call("POST", "/v1/maintenance/reconcile", json=body)
        _follow(api, accepted["task_id"], accepted["run_id"], out)


def optimize(settings: Settings, out: Any = sys.stdout) -> None:
    with Api(settings, timeout_s=3600.0) as api:
        print(json.dumps(api.call("POST", "/v1/maintenance/optimize"), indent=2), file=out)


def runs(settings: Settings, limit: int, out: Any = sys.stdout) -> None:
    with Api(settings) as api:
        for run in api.call("GET", "/v1/maintenance/runs", params={"limit": limit})["runs"]:
            print(_run_line(run), file=out)


def stats(settings: Settings, user: str | None, out: Any = sys.stdout) -> None:
    with Api(settings) as api:
        health = api.call("GET", "/health", accept=(503,))  # a degraded service is still worth describing
        report: dict[str, Any] = {"status": health["status"], "checks": health["checks"],
                                  "write_path": health.get("write_path"), "embedder": health.get("embedder")}
        if user is not None:
            count, cursor = 0, None
            for _ in range(10_000):  # bounded: 10,000 pages of 500
                params = {"user_id": user, "limit": 500, **({"cursor": cursor} if cursor else {})}
                page = api.call("GET", "/v1/memories", params=params)
                count += len(page["memories"])
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            report["user"] = {"user_id": user, "memories": count}
        print(json.dumps(report, indent=2), file=out)
