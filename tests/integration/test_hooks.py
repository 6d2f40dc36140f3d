"""The Claude Code hook commands against the real stack.

One `python -m service` (embedded profile, in-process worker, hash embedder) on a free port; the
recorded payloads in tests/data/hooks/ are fed to `python -m service.hooks <command>` subprocesses,
exactly as Claude Code runs them (event JSON on stdin). The stored memories are then read back
through the REST API. With the service stopped (a closed port) or hanging (a socket that accepts and
never answers), every command must exit 0, print nothing, and return within its budget: 1.5 s for
session-start, 0.3 s for post-tool-use and stop. The assertions use generous margins (timings on a
loaded CI machine vary), and a time over its margin is judged without the interpreter's start-up (within_limit);
the measured times are printed (`pytest -s`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scripts.bench.procs import ROOT, free_port, stack_env, start_service, stop
from tests.conftest import unique

PAYLOADS = ROOT / "tests" / "data" / "hooks"
RECORDED_ROOT = "/home/dev/projects/shop-api"
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
SESSION_START_LIMIT = 2.5  # the budget is 1.5 s; margin for a loaded machine
FAST_LIMIT = 1.0  # the budget is 0.3 s
TIMINGS: dict[str, list[float]] = {}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("hooks")
    env = stack_env(tmp / "data", unique("test:hooksq"))
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GOOGLE_API_KEY", raising=False)
        proc, port = start_service(env, tmp / "service.log")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
        if TIMINGS:
            print("\nhook wall times (s):")
            for label, values in sorted(TIMINGS.items()):
                print(f"  {label:<40} min {min(values):.3f}  max {max(values):.3f}  n={len(values)}")


@pytest.fixture
def http(api: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api, timeout=30) as c:
        yield c


class Project:
    """A project directory named by a `.memory-project` file, with its own user and session."""

    def __init__(self, tmp: Path) -> None:
        self.id = unique("shop")
        self.user = unique("hooks-user")
        self.session = unique("session")
        self.dir = tmp / "checkout"
        self.dir.mkdir()
        (self.dir / ".memory-project").write_text(self.id + "\n")
        self.state = tmp / "state"

    def event(self, name: str) -> bytes:
        data: dict[str, Any] = json.loads((PAYLOADS / name).read_text().replace(RECORDED_ROOT, str(self.dir)))
        data["session_id"] = self.session
        return json.dumps(data).encode()


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def hook_env(url: str, project: Project) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "CLAUDE_"))}
    env.update({"MEMORY_URL": url, "MEMORY_USER_ID": project.user, "XDG_STATE_HOME": str(project.state)})
    return env


def run_hook(command: str, stdin: bytes, env: dict[str, str], label: str | None = None) -> tuple[int, bytes, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "service.hooks", command], input=stdin, capture_output=True,
                          env=env, cwd=ROOT, timeout=60)
    elapsed = time.monotonic() - started
    TIMINGS.setdefault(label or f"{command} (service up)", []).append(elapsed)
    assert proc.stderr == b"", proc.stderr
    return proc.returncode, proc.stdout, elapsed


def within_limit(elapsed: float, limit: float) -> bool:
    """`elapsed` under `limit`; or, over it, what the hook itself spent under it: `elapsed` less the interpreter's
    start-up with the hook's imports, measured right then (`python -m service.hooks` without a command imports the
    commands and exits). Under two test processes and their Neo4j servers on 2 cores, start-up alone once took most
    of session-start's margin; a hook that waits on the service past its budget fails either way."""
    if elapsed < limit:
        return True
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "service.hooks"], stdin=subprocess.DEVNULL, capture_output=True, cwd=ROOT,
                   timeout=60, check=True)
    startup = time.monotonic() - started
    TIMINGS.setdefault("start-up alone (measured after a miss)", []).append(startup)
    return elapsed - startup < limit


def store(http: httpx.Client, **body: Any) -> None:
    resp = http.post("/v1/memories/raw", json=body)
    assert resp.status_code == 202, resp.text
    task = resp.json()["task_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = http.get(f"/v1/memories/status/{task}").json()
        if status["status"] in ("completed", "failed"):
            assert status["status"] == "completed", status
            return
        time.sleep(0.05)
    raise AssertionError(f"task {task} not finished")


def memories(http: httpx.Client, project: Project) -> list[dict[str, Any]]:
    resp = http.get("/v1/memories", params={"user_id": project.user, "project_id": project.id, "limit": 500})
    assert resp.status_code == 200, resp.text
    found: list[dict[str, Any]] = resp.json()["memories"]
    return found


def wait_for(http: httpx.Client, project: Project, predicate: Any, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for memory in memories(http, project):
            if predicate(memory):
                return memory
        time.sleep(0.1)
    raise AssertionError(f"no matching memory after {timeout}s: {memories(http, project)}")


def test_session_start_injects_the_stored_context(http: httpx.Client, api: str, project: Project) -> None:
    store(http, content="We deploy shop-api with blue-green releases", user_id=project.user,
          category="convention", project_id=project.id)
    store(http, content="Prefers tabs over spaces", user_id=project.user, category="preference")

    code, out, elapsed = run_hook("session-start", project.event("session_start.json"), hook_env(api, project))
    assert code == 0 and within_limit(elapsed, SESSION_START_LIMIT)
    payload = json.loads(out)
    assert list(payload) == ["hookSpecificOutput"]
    assert set(payload["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert payload["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = payload["hookSpecificOutput"]["additionalContext"]
    assert f"# Memory context (project {project.id})" in context
    assert "We deploy shop-api with blue-green releases" in context
    assert "Prefers tabs over spaces" in context

    other = hook_env(api, project) | {"MEMORY_USER_ID": unique("nobody")}
    code, out, _ = run_hook("session-start", project.event("session_start.json"), other)
    assert code == 0 and "blue-green" not in out.decode()  # another user's context is not this one


def test_post_tool_use_stores_redacted_observations(http: httpx.Client, api: str, project: Project) -> None:
    env = hook_env(api, project)
    for name in ("post_tool_use_bash_secret.json", "post_tool_use_failure_bash_pytest.json"):
        code, out, elapsed = run_hook("post-tool-use", project.event(name), env)
        assert code == 0 and out == b"" and within_limit(elapsed, FAST_LIMIT)

    curl = wait_for(http, project, lambda m: m["content"].startswith("Ran curl"))
    assert curl["content"] == ('Ran curl -sS -H "Authorization: Bearer [REDACTED]" '
                               '"https://api.payments.example/v1/charges?limit=3": ok')
    assert curl["category"] == "task_context" and curl["agent_id"] == "claude-code"
    assert curl["project_id"] == project.id and curl["scope"] == "project"
    assert curl["metadata"] == {"session_id": project.session, "tool": "Bash", "fold_key": "bash:curl"}
    assert SECRET not in json.dumps(curl) and "sk-live" not in json.dumps(curl)

    pytest_run = wait_for(http, project, lambda m: m["content"].startswith("Ran pytest"))
    assert pytest_run["content"] == "Ran pytest -q tests/test_search.py: 3 failed, 7 passed (exit 1)"
    assert pytest_run["metadata"]["fold_key"] == "bash:pytest"


def test_read_and_grep_store_nothing(http: httpx.Client, api: str, project: Project) -> None:
    env = hook_env(api, project)
    for name in ("post_tool_use_read.json", "post_tool_use_grep.json"):
        code, out, _ = run_hook("post-tool-use", project.event(name), env)
        assert code == 0 and out == b""
    # A later observation as a barrier: once it is stored, a write sent before it would be too.
    run_hook("post-tool-use", project.event("post_tool_use_edit.json"), env)
    edit = wait_for(http, project, lambda m: m["metadata"].get("tool") == "Edit")
    assert edit["content"] == "Edited service/api/search.py: added after, before, datetime (+2/-0 lines)"
    assert edit["metadata"]["fold_key"] == "edit:service/api/search.py"
    assert [m["metadata"]["tool"] for m in memories(http, project)] == ["Edit"]
    assert (project.state / "memory-hooks" / f"{project.session}.count").stat().st_size == 1


def test_stop_stores_the_session_marker(http: httpx.Client, api: str, project: Project) -> None:
    env = hook_env(api, project)
    for name in ("post_tool_use_edit.json", "post_tool_use_write.json", "post_tool_use_webfetch.json",
                 "post_tool_use_read.json"):
        run_hook("post-tool-use", project.event(name), env)
    code, out, elapsed = run_hook("stop", project.event("stop.json"), env)
    assert code == 0 and out == b"" and within_limit(elapsed, FAST_LIMIT)

    marker = wait_for(http, project, lambda m: m["category"] == "interaction")
    assert marker["content"] == f"Session {project.session} ended after 3 observations (project {project.id})"
    assert marker["metadata"] == {"session_id": project.session, "observations": 3}
    assert marker["agent_id"] == "claude-code" and marker["project_id"] == project.id
    write = wait_for(http, project, lambda m: m["metadata"].get("tool") == "Write")
    assert write["content"] == "Wrote new file tests/test_search_window.py (5 lines)"
    fetch = wait_for(http, project, lambda m: m["metadata"].get("tool") == "WebFetch")
    assert fetch["content"] == "Fetched https://docs.python.org/3/library/http.client.html"


def test_the_plugin_command_line(http: httpx.Client, api: str, project: Project) -> None:
    """hooks.json's command, through `sh -c` as Claude Code runs it, from the project directory."""
    store(http, content="Staging runs on port 8443", user_id=project.user, category="architecture",
          project_id=project.id)
    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    env = hook_env(api, project) | {"CLAUDE_PLUGIN_ROOT": str(ROOT), "MEMORY_PYTHON": sys.executable}
    event = {"session_id": project.session, "hook_event_name": "SessionStart", "source": "startup"}
    proc = subprocess.run(["sh", "-c", hooks["SessionStart"][0]["hooks"][0]["command"]],
                          input=json.dumps(event).encode(), capture_output=True, env=env, cwd=project.dir,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Staging runs on port 8443" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]

    proc = subprocess.run(["sh", "-c", hooks["PostToolUse"][0]["hooks"][0]["command"]],
                          input=project.event("post_tool_use_bash_ok.json"), capture_output=True, env=env,
                          cwd=project.dir, timeout=60)
    assert proc.returncode == 0 and proc.stdout == b""
    ok = wait_for(http, project, lambda m: m["metadata"].get("tool") == "Bash")
    assert ok["content"] == "Ran git status --short: ok"


# ------------------------------------------------------------------------- one task trace per session


def wait_run(http: httpx.Client, project: Project, session: str, predicate: Any, timeout: float = 30
             ) -> dict[str, Any]:
    """The session's run once `predicate(run)` holds (the hooks send from detached children)."""
    deadline = time.monotonic() + timeout
    got: dict[str, Any] = {}
    while time.monotonic() < deadline:
        listed = http.get("/v1/runs", params={"user_id": project.user, "session_id": session}).json()["items"]
        assert len(listed) <= 1, listed  # one run per session
        if listed:
            got = http.get(f"/v1/runs/{listed[0]['run_id']}", params={"user_id": project.user}).json()
            if predicate(got):
                return got
        time.sleep(0.1)
    raise AssertionError(f"no matching run after {timeout}s: {got}")


def test_the_hooks_build_one_redacted_trace_per_session(http: httpx.Client, api: str, project: Project) -> None:
    env = hook_env(api, project)
    for name in ("post_tool_use_bash_secret.json", "post_tool_use_failure_bash_pytest.json",
                 "post_tool_use_read.json", "post_tool_use_bash_pytest_ok.json"):
        code, out, elapsed = run_hook("post-tool-use", project.event(name), env)
        assert code == 0 and out == b"" and within_limit(elapsed, FAST_LIMIT)
    code, out, elapsed = run_hook("stop", project.event("stop.json"), env)
    assert code == 0 and out == b"" and within_limit(elapsed, FAST_LIMIT)

    run = wait_run(http, project, project.session,
                   lambda r: r["outcome"] != "open" and [s["action"] for s in r["trace"]].count(None) == 0
                   and len(r["trace"]) == 3)
    assert run["run_id"] == f"cc-{project.session}" and run["project_id"] == project.id
    assert run["agent_id"] == "claude-code" and run["session_id"] == project.session
    assert [s["seq"] for s in run["trace"]] == [0, 1, 2]  # the Read was skipped, as for observations
    calls = [s["tool_calls"][0] for s in run["trace"]]
    assert [c["tool"] for c in calls] == ["Bash", "Bash", "Bash"]
    assert [c["status"] for c in calls] == ["ok", "error", "ok"]
    # redacted by the hook, then again by the API (its rules see the arguments as JSON text: the header's value)
    assert json.loads(calls[0]["arguments"]) == {
        "command": 'curl -sS -H "Authorization: [REDACTED] [REDACTED]" "https://api.payments.example/v1/charges?limit=3"',
        "description": "List the three most recent charges"}
    assert calls[1]["error"].startswith("Ran pytest -q tests/test_search.py: 3 failed, 7 passed (exit 1)\n")
    assert "FAILED tests/test_search.py::test_window" in calls[1]["error"]
    assert (calls[1]["duration_ms"], calls[2]["duration_ms"]) == (1830, 1712)
    assert calls[2]["result"] == "Ran pytest -q tests/test_search.py: 10 passed"
    assert run["outcome"] == "success"  # the last call went through
    assert run["summary"] == ("I added `after`/`before` filters to search and a test; 3 tests still fail. "
                              "(3 tool calls, 1 failed)")
    dumped = json.dumps(run)
    assert SECRET not in dumped and "sk-live" not in dumped

    # another session of the same project is another run
    other = Project.__new__(Project)
    other.__dict__.update(project.__dict__, session=unique("session"))
    run_hook("post-tool-use", other.event("post_tool_use_failure_bash_pytest.json"), env)
    run_hook("stop", other.event("stop.json"), env)
    second = wait_run(http, project, other.session, lambda r: r["outcome"] != "open")
    assert second["run_id"] == f"cc-{other.session}" and second["outcome"] == "failure"
    assert second["error_kind"] == "tool_error" and second["failed_tool_calls"] == 1
    listed = http.get("/v1/runs", params={"user_id": project.user}).json()["items"]
    assert sorted(r["session_id"] for r in listed) == sorted([project.session, other.session])


def test_session_start_shows_a_lesson_from_an_earlier_session(http: httpx.Client, api: str,
                                                              project: Project) -> None:
    env = hook_env(api, project)
    for name in ("post_tool_use_failure_bash_pytest.json", "post_tool_use_bash_pytest_ok.json"):
        run_hook("post-tool-use", project.event(name), env)
    run_hook("stop", project.event("stop.json"), env)
    wait_run(http, project, project.session, lambda r: r["outcome"] == "success" and len(r["trace"]) == 2)

    later = Project.__new__(Project)
    later.__dict__.update(project.__dict__, session=unique("session"))
    wait_for(http, project, lambda m: m["category"] == "interaction")  # the session's writes are done
    direct = http.get(f"/v1/context/{project.id}", params={"user_id": project.user, "format": "markdown",
                                                          "session_id": later.session})
    assert direct.status_code == 200 and "## From earlier sessions" in direct.text
    code, out, elapsed = run_hook("session-start", later.event("session_start.json"), env)
    assert code == 0 and within_limit(elapsed, SESSION_START_LIMIT)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "## From earlier sessions" in context
    lesson = context.split("## From earlier sessions\n", 1)[1]
    assert lesson.startswith("- `Bash` `pytest -q tests/test_search.py` failed: "
                             "Ran pytest -q tests/test_search.py: 3 failed, 7 passed (exit 1); "
                             "then `Bash` `pytest -q tests/test_search.py` went through; the task succeeded")
    assert len(context) <= 4000

    # the session's own failures are not "earlier sessions"
    code, out, _ = run_hook("session-start", project.event("session_start.json"), env)
    assert "From earlier sessions" not in json.loads(out)["hookSpecificOutput"]["additionalContext"]


# ------------------------------------------------------------------------- service stopped or hanging


@pytest.fixture
def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"




CASES = [
    ("session-start", "session_start.json", SESSION_START_LIMIT),
    ("post-tool-use", "post_tool_use_bash_secret.json", FAST_LIMIT),
    ("post-tool-use", "post_tool_use_edit.json", FAST_LIMIT),
    ("stop", "stop.json", FAST_LIMIT),
]


@pytest.mark.parametrize("down", ["closed", "hanging"])
@pytest.mark.parametrize(("command", "name", "limit"), CASES)
def test_commands_with_the_service_down(
    command: str, name: str, limit: float, down: str, closed_url: str, hanging_url: str, project: Project
) -> None:
    url = closed_url if down == "closed" else hanging_url
    for _ in range(3):
        code, out, elapsed = run_hook(command, project.event(name), hook_env(url, project),
                                      label=f"{command} (service {down})")
        assert code == 0 and out == b""
        assert within_limit(elapsed, limit), f"{command} took {elapsed:.2f}s with the service {down}"
