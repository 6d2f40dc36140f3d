"""Memory commands of `python -m service`, for a person at a terminal and for scripts (`--json`). They talk to the
running API through the typed client (service/client.py): `--url` / `--api-key`, else MEMORY_API_URL /
MEMORY_API_KEY, else http://127.0.0.1:<PORT>.

    python -m service add TEXT [--category C [--scope S]] [--project P] [--wait]   (no category: extracted)
    python -m service search QUERY [--project P] [--limit N]
    python -m service list [--scope S] [--category C] [--project P] [--agent A] [--order O] [--limit N] [--cursor C]
    python -m service get ID
    python -m service delete ID... [--yes]

`get` and `delete` take a memory's full id or any unique prefix of it (the 8 characters `search` prints); a
prefix that names several memories is refused with the candidates listed.
    python -m service status TASK_ID [--follow]

Each takes `--user U` (needed with an admin key; under AUTH_MODE=none the default is DEFAULT_USER_ID; a user key
implies its user) and `--json` (one JSON document on stdout) — without it, tables.

Exit codes (one rule for every command of `python -m service`): 0 done; 1 the API refused the request (a 4xx)
or a task it followed failed; 2 a usage error (bad arguments, a deletion not confirmed); 3 the API is unreachable
or unavailable (no answer, a 5xx).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from service.client import AmbiguousId, ApiError, MemoryClient
from service.core.settings import Settings
from service.tasks.status import TaskResponse

OK, REFUSED, USAGE, UNAVAILABLE = 0, 1, 2, 3
COMMANDS = ("add", "search", "list", "get", "delete", "status")
FOLLOW_S = 3600.0


class UsageError(Exception):
    """A usage error with its message (exit 2)."""


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """The memory commands' parsers; `common` carries --url, --api-key, --user, --json."""
    add = sub.add_parser("add", parents=[common], help="store a memory (no --category: facts extracted from TEXT)")
    add.add_argument("text")
    add.add_argument("--category", default=None, help="store TEXT as one memory of this category")
    add.add_argument("--scope", choices=["global", "project"], default=None,
                     help="with --category: global (about you, everywhere) or project (needs --project); "
                          "default: the category's")
    add.add_argument("--project", default=None)
    add.add_argument("--wait", action="store_true", help="follow the task to its end")
    search = sub.add_parser("search", parents=[common], help="search memories")
    search.add_argument("query")
    search.add_argument("--project", default=None)
    search.add_argument("--limit", type=int, default=10)
    listing = sub.add_parser("list", parents=[common], help="a page of memories (newest cursor: --cursor)")
    listing.add_argument("--scope", choices=["global", "project"], default=None)
    listing.add_argument("--category", default=None)
    listing.add_argument("--project", default=None)
    listing.add_argument("--agent", default=None)
    listing.add_argument("--order", choices=["newest", "oldest", "id"], default=None,
                         help="newest first (the default), oldest first, or by id")
    listing.add_argument("--limit", type=int, default=None)
    listing.add_argument("--cursor", default=None)
    get = sub.add_parser("get", parents=[common], help="one memory (its id or any unique prefix of it)")
    get.add_argument("id")
    delete = sub.add_parser("delete", parents=[common], help="delete memories by id (or unique id prefixes)")
    delete.add_argument("ids", nargs="+", metavar="ID")
    delete.add_argument("--yes", action="store_true", help="do not ask (required when stdin is not a terminal)")
    status = sub.add_parser("status", parents=[common], help="a task's status")
    status.add_argument("task_id")
    status.add_argument("--follow", action="store_true", help="poll until the task ends")


def common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=None, help="the API (default: MEMORY_API_URL, else http://127.0.0.1:PORT)")
    common.add_argument("--api-key", default=None, help="an API key (default: MEMORY_API_KEY)")
    common.add_argument("--user", default=None, help="the user to act for (admin key, AUTH_MODE=none)")
    common.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return common


def client_for(settings: Settings, args: argparse.Namespace) -> MemoryClient:
    url = args.url or settings.mcp.api_url or f"http://127.0.0.1:{settings.service.port}"
    key = args.api_key or (settings.mcp.api_key.get_secret_value() if settings.mcp.api_key else None)
    return MemoryClient(url, key, retries=1)


def run(settings: Settings, args: argparse.Namespace, out: Any = None, err: Any = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        with client_for(settings, args) as client:
            return Commands(client, args, out, err).dispatch()
    except ApiError as exc:
        print(f"error: {exc}", file=err)
        return exit_code_of(exc.status)
    except UsageError as exc:
        print(f"error: {exc}", file=err)
        return USAGE


def exit_code_of(status: int) -> int:
    """The rule's code for an HTTP status (0: no answer), for every command of `python -m service`."""
    return UNAVAILABLE if status == 0 or status >= 500 else REFUSED


class Commands:
    def __init__(self, client: MemoryClient, args: argparse.Namespace, out: Any, err: Any) -> None:
        self.client = client
        self.args = args
        self.out = out
        self.err = err
        self.console = Console(file=out, soft_wrap=False, width=160 if not getattr(out, "isatty", lambda: False)()
                               else None)

    def dispatch(self) -> int:
        result: int = getattr(self, f"cmd_{self.args.command}")()
        return result

    def emit(self, data: Any, table: Table | str) -> None:
        if self.args.json:
            body = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
            print(json.dumps(body, indent=2, default=str), file=self.out)
        else:
            self.console.print(table)

    def memory_id(self, ref: str) -> str:
        """The full id of the user's memory that `ref` names (a full id, or a unique prefix: the client's
        `resolve`); several candidates are a usage error that lists them."""
        try:
            return self.client.resolve(ref, user_id=self.args.user)
        except AmbiguousId as exc:
            raise UsageError(exc.detail) from exc

    def cmd_add(self) -> int:
        a = self.args
        if a.category:
            accepted = self.client.add(a.text, category=a.category, user_id=a.user, project_id=a.project,
                                       **({"scope": a.scope} if a.scope else {}))
        elif a.scope:
            print("error: --scope goes with --category (without one, each extracted fact gets its category's scope)",
                  file=self.err)
            return USAGE
        else:
            accepted = self.client.add_conversation([{"role": "user", "content": a.text}], user_id=a.user,
                                                    project_id=a.project)
        if not a.wait:
            self.emit(accepted, f"accepted: task {accepted.task_id} (follow: python -m service status "
                                f"{accepted.task_id} --follow)")
            return OK
        return self.show_task(self.follow(accepted.task_id))

    def cmd_search(self) -> int:
        a = self.args
        found = self.client.search(a.query, user_id=a.user, project_id=a.project, limit=a.limit)
        table = Table("score", "id", "category", "scope", "content", title=f"{len(found.results)} result(s)")
        for r in found.results:
            table.add_row(f"{r.score:.3f}", r.id[:8], r.category or "", r.scope or "", r.content)
        self.emit(found, table)
        return OK

    def cmd_list(self) -> int:
        a = self.args
        page = self.client.list(user_id=a.user, scope=a.scope, category=a.category, project_id=a.project,
                                agent_id=a.agent, limit=a.limit, cursor=a.cursor, order=a.order)
        title = f"{len(page.memories)} memories" + (f" (next: --cursor {page.next_cursor})" if page.next_cursor
                                                     else "")
        table = Table("id", "category", "scope", "project", "created", "content", title=title)
        for m in page.memories:
            table.add_row(m.id, m.category, m.scope, m.project_id or "", m.created_at[:19], m.content)
        self.emit(page, table)
        return OK

    def cmd_get(self) -> int:
        memory = self.client.get(self.memory_id(self.args.id), user_id=self.args.user)
        table = Table("field", "value", show_header=False)
        for name, value in memory.model_dump(mode="json").items():
            table.add_row(name, value if isinstance(value, str) else json.dumps(value))
        self.emit(memory, table)
        return OK

    def cmd_delete(self) -> int:
        a = self.args
        ids = [self.memory_id(ref) for ref in a.ids]
        if not a.yes:
            if not sys.stdin.isatty():
                print("error: deleting needs --yes when stdin is not a terminal", file=self.err)
                return USAGE
            answer = input(f"delete {len(ids)} memor{'y' if len(ids) == 1 else 'ies'}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("not deleted", file=self.err)
                return USAGE
        accepted = [self.client.delete(memory_id, user_id=a.user) for memory_id in ids]
        tasks = [t.wait() for t in accepted]
        table = Table("id", "task", "status", "error")
        for memory_id, task in zip(ids, tasks, strict=True):
            table.add_row(memory_id, task.task_id, task.status, task.error or "")
        self.emit([t.model_dump(mode="json") for t in tasks], table)
        return OK if all(t.status == "completed" for t in tasks) else REFUSED

    def cmd_status(self) -> int:
        task = self.follow(self.args.task_id) if self.args.follow else self.client.task(self.args.task_id)
        return self.show_task(task)

    def follow(self, task_id: str) -> TaskResponse:
        """Poll until the task ends; a spinner with its progress on a terminal (stderr)."""
        console = Console(file=self.err)
        deadline = time.monotonic() + FOLLOW_S
        with console.status(f"task {task_id}: queued", spinner="dots") as spin:
            while True:
                task = self.client.task(task_id)
                done = f" ({task.progress.done}/{task.progress.total})" if task.progress else ""
                waiting = (f" on {task.retry.dependency}, attempt {task.retry.attempt}, next at {task.retry.next_at}"
                           if task.retry and task.status == "retrying" else "")
                spin.update(f"task {task_id}: {task.status}{done}{waiting}")
                if task.status in ("completed", "failed") or time.monotonic() > deadline:
                    return task
                time.sleep(0.3)

    def show_task(self, task: TaskResponse) -> int:
        table = Table("field", "value", show_header=False)
        table.add_row("task", task.task_id)
        table.add_row("status", task.status)
        if task.progress:
            table.add_row("progress", f"{task.progress.done}/{task.progress.total}")
        for m in (task.result.memories if task.result is not None else None) or []:
            table.add_row("memory", f"{m.id} [{m.category}] {m.content}")
        if task.retry and task.status != "completed":
            table.add_row("waiting on", f"{task.retry.dependency} (attempt {task.retry.attempt}, since "
                                        f"{task.retry.since}, next at {task.retry.next_at}): {task.retry.reason}")
        if task.error:
            table.add_row("error", task.error)
        self.emit(task, table)
        return REFUSED if task.status == "failed" else OK
