"""Operator commands of `python -m service`: they talk to the running API (`MEMORY_API_URL`, default
http://127.0.0.1:<PORT>, with `MEMORY_API_KEY` when set), because in the embedded profile the API process
holds the stores. Each exits 1 with one clear line when the API cannot be reached or refuses.

    python -m service dedup run [--user U] [--dry-run]   start a run and follow it to its end
    python -m service dedup runs [--limit N]             the latest dedup and reconcile runs
    python -m service reconcile [--user U] [--dry-run]   a full Qdrant <-> Neo4j reconcile, followed
    python -m service stats [--user U] [--json]          health, write-path backlog (and a user's count)
    python -m service export --user U [--project P] [--vectors] [-o FILE]   NDJSON (FILE.gz: gzip)
    python -m service import FILE [--json]               an export file, followed to its end
    python -m service optimize                           build the vector index now
    python -m service reembed [--user U]                 re-embed stored memories with the configured embedder

`stats` and `import` print lines for a person, one JSON document with `--json`.
Long runs (dedup, reconcile, export, import, reembed) draw a progress bar (done / total, rate) on stderr when it is
a terminal; the lines on stdout stay the same either way.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from service.core.loop import describe
from service.core.settings import Settings

FOLLOW_S = 3600.0  # how long a followed run is polled before giving up (the run goes on)
POLL_S = 1.0


class CliError(Exception):
    """One line for the user; `exit_code` follows the rule of service/cli/memory.py (1 refused, 3 unavailable)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Api:
    def __init__(self, settings: Settings, timeout_s: float = 30.0) -> None:
        self.url = settings.mcp.api_url or f"http://127.0.0.1:{settings.service.port}"
        key = settings.mcp.api_key.get_secret_value() if settings.mcp.api_key else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s, headers=headers)

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    @contextmanager
    def stream(self, method: str, path: str, **kwargs: Any) -> Iterator[httpx.Response]:
        """A streamed answer (the export); errors as in `call`."""
        try:
            with self._http.stream(method, path, **kwargs) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise CliError(f"{method} {path}: {resp.status_code} {_detail(resp)}",
                                   3 if resp.status_code >= 500 else 1)
                yield resp
        except httpx.TransportError as exc:
            raise CliError(f"the memory API at {self.url} is not reachable ({type(exc).__name__}); start it "
                           "(./scripts/dev.sh or python -m service) or set MEMORY_API_URL", 3) from exc

    def call(self, method: str, path: str, *, accept: tuple[int, ...] = (), **kwargs: Any) -> Any:
        """The JSON answer; a status >= 400 not in `accept` is a CliError with the API's detail."""
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CliError(f"the memory API at {self.url} is not reachable ({type(exc).__name__}); start it "
                           "(./scripts/dev.sh or python -m service) or set MEMORY_API_URL", 3) from exc
        if resp.status_code >= 400 and resp.status_code not in accept:
            raise CliError(f"{method} {path}: {resp.status_code} {_detail(resp)}", 3 if resp.status_code >= 500 else 1)
        return resp.json()


def _detail(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("detail", resp.text))
    except ValueError:
        return resp.text


@contextmanager
def progress_bar(what: str) -> Iterator[tuple[Progress, TaskID]]:
    """A rich progress bar on stderr (done / total, rate, elapsed); drawn only when stderr is a terminal."""
    console = Console(file=sys.stderr)
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                   console=console, disable=not console.is_terminal, transient=True)
    with bar:
        yield bar, bar.add_task(what, total=None, rate="")


def _advance(bar: Progress, task: TaskID, progress: dict[str, Any] | None, started: float) -> None:
    if progress:
        done, total = int(progress.get("done", 0)), int(progress.get("total", 0))
        rate = done / max(1e-6, time.monotonic() - started)
        bar.update(task, completed=done, total=total or None, rate=f"{rate:,.0f}/s")


def _follow(api: Api, task_id: str, run_id: str, out: Any) -> dict[str, Any]:
    """Poll a maintenance run until its task ends; one line per change of state, and a progress bar."""
    deadline = time.monotonic() + FOLLOW_S
    last = ""
    with progress_bar(f"run {run_id[:12]}") as (bar, bar_task):
        started = time.monotonic()
        for _ in range(int(FOLLOW_S / POLL_S) + 1):
            task = api.call("GET", f"/v1/tasks/{task_id}")
            run = api.call("GET", f"/v1/maintenance/runs/{run_id}")
            _advance(bar, bar_task, run.get("progress"), started)
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
    """POST /v1/maintenance/optimize (a task) and follow it, with a progress line on a terminal; prints the build's
    report (the task's result)."""
    with Api(settings) as api:
        accepted = api.call("POST", "/v1/maintenance/optimize")
        task_id, task = _follow_task(api, accepted["task_id"], "building the vector index")
    if task["status"] != "completed":
        raise CliError(f"index build task {task_id} {task['status']}: {task.get('error')}")
    print(json.dumps(task["result"], indent=2), file=out)


def export(settings: Settings, user: str, project: str | None, vectors: bool, output: str | None,
           out: Any = sys.stdout) -> None:
    """Stream GET /v1/export into `output` (gzip when it ends in .gz) or stdout; a summary line on stderr."""
    params: dict[str, Any] = {"user_id": user, "include_vectors": str(vectors).lower()}
    if project:
        params["project_id"] = project
    counts: dict[str, Any] = {}
    with contextlib.ExitStack() as files:
        write: Callable[[bytes], object]
        if output is None:
            write = (out.buffer if hasattr(out, "buffer") else sys.stdout.buffer).write
        elif output.endswith(".gz"):
            write = files.enter_context(gzip.open(output, "wb")).write
        else:
            write = files.enter_context(Path(output).open("wb")).write
        with Api(settings, timeout_s=3600.0) as api, progress_bar(f"export {user}") as (bar, task):
            started = time.monotonic()
            with api.stream("GET", "/v1/export", params=params) as resp:
                memories = 0
                for line in resp.iter_lines():
                    if not line:
                        continue
                    write(line.encode() + b"\n")
                    kind = line[9:20]  # '{"type":"<kind>"...': a cheap look, the file is not re-parsed
                    if kind.startswith("header"):
                        bar.update(task, total=json.loads(line).get("totals", {}).get("memories"))
                    elif kind.startswith("memory"):
                        memories += 1
                        if memories % 100 == 0:
                            _advance(bar, task, {"done": memories, "total": bar.tasks[0].total or 0}, started)
                    elif kind.startswith("end"):
                        counts = json.loads(line)["counts"]
    if not counts:
        raise CliError("the export stream ended early (no end line): the file is incomplete")
    print(f"exported {counts['memories']} memories, {counts['entities']} entities, {counts['facts']} facts"
          + (f" to {output}" if output else ""), file=sys.stderr)


def import_file(settings: Settings, path: str, out: Any = sys.stdout, as_json: bool = False) -> None:
    """POST an export file to /v1/import and follow the task; prints its result (counts, rejected lines): lines,
    or the task's result as JSON."""
    try:
        body = Path(path).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}") from exc
    with Api(settings, timeout_s=600.0) as api:
        accepted = api.call("POST", "/v1/import", content=body, headers={"content-type": "application/octet-stream"})
        task_id, task = _follow_task(api, accepted["task_id"], f"import {Path(path).name}")
    if task["status"] != "completed":
        raise CliError(f"import task {task_id} {task['status']}: {task.get('error')}")
    result = {"task_id": task_id, **task["result"]}
    if as_json:
        print(json.dumps(result, indent=2), file=out)
        return
    counts = result.get("imported") or {}
    print(f"imported {counts.get('memories', 0)} memories, {counts.get('entities', 0)} entities, "
          f"{counts.get('facts', 0)} facts (task {task_id})", file=out)
    if result.get("vectors"):
        print(f"vectors: {result['vectors']} ({result.get('embedder')})", file=out)
    rejected = result.get("rejected") or []
    print(f"rejected: {counts.get('rejected', len(rejected))} line(s)", file=out)
    for r in rejected:
        print(f"  line {r.get('line')}: {r.get('reason')}", file=out)


def _follow_task(api: Api, task_id: str, label: str) -> tuple[str, dict[str, Any]]:
    """Poll a task until it ends, with a progress bar; a completed task that names `result.next_task_id` (a run in
    parts) is followed by that one. Returns the last task's id and status (still running after FOLLOW_S: as is)."""
    task: dict[str, Any] = {}
    with progress_bar(label) as (bar, bar_task):
        started = time.monotonic()
        for _ in range(int(FOLLOW_S / POLL_S) + 1):
            task = api.call("GET", f"/v1/tasks/{task_id}")
            _advance(bar, bar_task, task.get("progress"), started)
            following = (task.get("result") or {}).get("next_task_id")
            if task["status"] == "completed" and following:
                task_id = str(following)
            elif task["status"] in ("completed", "failed"):
                break
            time.sleep(POLL_S)
    return task_id, task


def reembed(settings: Settings, user: str | None, out: Any = sys.stdout) -> None:
    """POST /v1/maintenance/reembed and follow the run, part after part, to its end (progress bar on stderr)."""
    with Api(settings) as api:
        accepted = api.call("POST", "/v1/maintenance/reembed", json={"user_id": user} if user else {})
        task_id, task = _follow_task(api, accepted["task_id"], "re-embed")
    if task["status"] == "failed":
        raise CliError(f"re-embed task {task_id} failed: {task.get('error')} (run the command again to resume)")
    if task["status"] != "completed":
        raise CliError(f"re-embed task {task_id} still running after {FOLLOW_S:.0f} s (it goes on)")
    print(json.dumps({"task_id": task_id, **task["result"]}), file=out)


def runs(settings: Settings, limit: int, out: Any = sys.stdout) -> None:
    with Api(settings) as api:
        for run in api.call("GET", "/v1/maintenance/runs", params={"limit": limit})["items"]:
            print(_run_line(run), file=out)


def stats(settings: Settings, user: str | None, out: Any = sys.stdout, as_json: bool = False) -> None:
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
    if as_json:
        print(json.dumps(report, indent=2), file=out)
        return
    for line in _stats_lines(report):
        print(line, file=out)


def _stats_lines(report: dict[str, Any]) -> list[str]:
    """The stats report for a person: one line per part, `name  value` pairs."""
    def pairs(values: dict[str, Any] | None) -> str:
        return ", ".join(f"{k.replace('_', ' ')} {'-' if v is None else v}" for k, v in (values or {}).items())

    write_path = dict(report.get("write_path") or {})
    loops = write_path.pop("loops", None) or []
    lines = [f"status      {report['status']}", f"checks      {pairs(report.get('checks'))}",
             f"write path  {pairs(write_path)}", f"embedder    {report.get('embedder') or '-'}"]
    lines += [f"loop        {describe(loop)}" for loop in loops]  # each process's event loop
    if report.get("user"):
        lines.append(f"user        {report['user']['user_id']}: {report['user']['memories']} memories")
    return lines
