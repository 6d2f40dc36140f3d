"""One short observation per tool call, without an LLM.

`observe(event)` turns a PostToolUse (or PostToolUseFailure) event into an `Observation`: a line of
at most `MAX_CONTENT` characters saying what the agent did and how it went, the tool name, and a
`fold_key` naming "the same action" so the service can fold repeats (`edit:<path>`,
`bash:<program [subcommand]>`, `fetch:<host>`, ...). Noisy read-only tools give None.

| tool | observation |
|---|---|
| Edit, MultiEdit | `Edited <path>: added function parse, after (+3/-1 lines)` from the old/new strings |
| Write | `Wrote <path> (N lines)`, `Wrote new file <path> (N lines)` |
| Bash | `Ran <command>: ok`, `Ran pytest -q: 3 failed, 7 passed (exit 1)`, `Ran make: exit 2: <last line>` |
| WebFetch | `Fetched https://host/path` (no query string, no credentials), `(HTTP 404)` when it failed |
| WebSearch | `Searched the web for "<query>"` |
| Agent, Task | `Ran subagent <type>: <description>` |
| NotebookEdit | `Edited notebook <path> (<mode> cell)` |
| MCP tools | `Called MCP tool <server>/<tool>` (this service's own tools are skipped) |
| other | `Used <tool> on <path>` |

Commands, outputs, URLs, queries and edited text are redacted (`redact.py`) before any of it is
used; file contents are never copied, only names found in an edit (functions, identifiers). Edits of
secret-looking files (`.env`, `*.pem`, `credentials`, ...) record the path only.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any
from urllib.parse import urlsplit

from service.hooks.edits import edit_changes
from service.hooks.redact import REDACTED, redact

MAX_CONTENT = 500
MAX_COMMAND = 200
MAX_DETAIL = 160
MAX_FOLD_KEY = 200
MAX_TEXT_CHARS = 4000  # of a command, URL, query or description that is redacted (cut at a space)
TAIL_CHARS = 4000

# Read-only or bookkeeping tools: nothing worth remembering happened.
SKIPPED_TOOLS = frozenset(
    {
        "Read", "Glob", "Grep", "LS", "AskUserQuestion", "TodoWrite", "TodoRead", "NotebookRead",
        "BashOutput", "KillShell", "KillBash", "ExitPlanMode", "ListMcpResourcesTool", "ReadMcpResourceTool",
    }
)
# This service's MCP tools (`mcp__<server>__<tool>`): storing "called remember" would be an echo.
OWN_MCP_TOOLS = frozenset(
    {
        "recall_memories", "remember", "remember_conversation", "get_project_context",
        "search_knowledge_graph", "list_memories", "delete_memories", "get_task_status",
        "start_task", "record_task_step", "finish_task", "recall_similar_tasks",
    }
)
FAILURE_EVENT = "PostToolUseFailure"

_SENSITIVE_FILE = re.compile(
    r"(?i)(^\.env(\..*)?$|^\.envrc$|\.(pem|key|p12|pfx|kdbx|jks|keystore)$|^id_(rsa|dsa|ecdsa|ed25519)|"
    r"credential|secret|^\.netrc$|^\.npmrc$|^\.pypirc$|^\.pgpass$)"
)
_TEST_SUMMARY = re.compile(r"\b\d+ (?:passed|failed|errors?|error|tests? failed)\b", re.I)
_EXIT_LINE = re.compile(r"^\s*(?:Error:\s*)?Exit code (-?\d+)\s*$", re.I)
_LEADING_ASSIGNMENTS = re.compile(r"^\s*((?:[A-Za-z_][A-Za-z0-9_]*=(?:\"[^\"]*\"|'[^']*'|\S*)\s+)+)")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S*)")
_SECRET_NAME = re.compile(r"(?i)key|token|secret|passw|pwd|credential|auth")
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "exec", "command", "nice", "timeout", "xargs"})
_NOT_PROGRAMS = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "true", ":"})
_MULTIPLEXERS = frozenset(
    {
        "git", "npm", "pnpm", "yarn", "bun", "npx", "cargo", "go", "docker", "podman", "kubectl", "helm", "make", "uv",
        "pip", "pip3", "poetry", "pdm", "hatch", "gh", "terraform", "dotnet", "mvn", "gradle", "gradlew", "brew", "apt",
        "apt-get", "dnf", "systemctl", "just", "tox", "nox", "bundle", "rails", "rake", "mix", "deno", "composer",
        "conda", "alembic", "django-admin"
    }
)
_SUBCOMMAND = re.compile(r"^[A-Za-z][\w:.\-]{0,40}$")


@dataclass(frozen=True)
class Observation:
    content: str
    tool: str
    fold_key: str


def one_line(text: str) -> str:
    return " ".join(text.split())


def trim(text: str, limit: int) -> str:
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def display_path(path: str, base: str | None) -> str:
    """`path` relative to `base` when it is inside it, else as given."""
    if not path:
        return "?"
    if base:
        try:
            p, b = PurePath(path), PurePath(base)
            if p.is_absolute() and b.is_absolute() and p.is_relative_to(b) and p != b:
                return p.relative_to(b).as_posix()
        except ValueError:
            pass
    return path


def head_at_space(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """At most `limit` characters of `text`, cut at whitespace so that no token (or secret) is cut.

    Only a prefix of a command or query is ever shown, so only a prefix is redacted: redaction is
    linear, but megabytes of it would not fit post-tool-use's budget."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(" ", 0, limit), text.rfind("\n", 0, limit), text.rfind("\t", 0, limit))
    return text[:cut] + " …" if cut > 0 else "…"


def _sensitive(path: str) -> bool:
    return bool(_SENSITIVE_FILE.search(PurePath(path).name))


# ------------------------------------------------------------------------------------------- edits


def edit_detail(pairs: list[tuple[str, str]]) -> str:
    """What an edit changed, e.g. `added function parse, after (+3/-1 lines)`."""
    changes, added, removed = edit_changes(pairs)
    return trim(changes, MAX_DETAIL) + f" (+{added}/-{removed} lines)"


def _edit(tool: str, tool_input: Mapping[str, Any], base: str | None) -> tuple[str, str]:
    path = _str(tool_input.get("file_path"))
    shown = display_path(path, base)
    if tool == "MultiEdit":
        edits = [e for e in tool_input.get("edits") or [] if isinstance(e, Mapping)]
        pairs = [(_str(e.get("old_string")), _str(e.get("new_string"))) for e in edits]
        label = f"Edited {shown} ({len(pairs)} edits)"
    else:
        pairs = [(_str(tool_input.get("old_string")), _str(tool_input.get("new_string")))]
        label = f"Edited {shown}"
        if tool_input.get("replace_all") is True:
            label += " (all occurrences)"
    if _sensitive(path):
        return f"{label}: content not recorded", f"edit:{shown}"
    return f"{label}: {edit_detail(pairs)}", f"edit:{shown}"


def _line_count(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _write(tool_input: Mapping[str, Any], response: Mapping[str, Any], base: str | None) -> tuple[str, str]:
    path = _str(tool_input.get("file_path")) or _str(response.get("filePath"))
    shown = display_path(path, base)
    lines = _line_count(_str(tool_input.get("content")))
    new = " new file" if response.get("type") == "create" else ""
    return f"Wrote{new} {shown} ({lines} line{'s' if lines != 1 else ''})", f"write:{shown}"


# -------------------------------------------------------------------------------------------- bash


def redact_command(command: str) -> str:
    """A command with secrets removed; leading `NAME=value` assignments keep their names."""
    match = _LEADING_ASSIGNMENTS.match(command)
    if not match:
        return redact(command)
    assignments = []
    for name, value in _ASSIGNMENT.findall(match.group(1)):
        assignments.append(f"{name}={REDACTED}" if _SECRET_NAME.search(name) else f"{name}={redact(value)}")
    return " ".join(assignments) + " " + redact(command[match.end():])


def _tokens(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=False, posix=True)
    except ValueError:
        return segment.split()


def command_key(command: str) -> str:
    """`program [subcommand]` of a command line, for its fold key: `git status`, `pytest`, `python -m x`."""
    for segment in re.split(r"&&|\|\||;|\n", command):
        words = [w for w in _tokens(segment) if not _ASSIGNMENT.fullmatch(w)]
        while words and words[0] in _WRAPPERS:
            words = words[1:]
            while words and words[0].startswith("-"):  # `timeout 5`, `nice -n 5`: options of the wrapper
                words = words[1:]
            while words and words[0].isdigit():
                words = words[1:]
        if not words or words[0] in _NOT_PROGRAMS:
            continue
        program = os.path.basename(words[0]) or words[0]
        if program.startswith("python") and len(words) > 2 and words[1] == "-m" and _SUBCOMMAND.match(words[2]):
            return f"{program} -m {words[2]}"
        if program in _MULTIPLEXERS and len(words) > 1 and _SUBCOMMAND.match(words[1]):
            return f"{program} {words[1]}"
        return program if _SUBCOMMAND.match(program) else "command"
    return "command"


def _tail_lines(*texts: str) -> list[str]:
    """The last lines of some output (at most TAIL_CHARS characters, never a line cut at its start)."""
    text = "\n".join(t for t in texts if t).rstrip()
    if len(text) > TAIL_CHARS:
        text = text[-TAIL_CHARS:]
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return [line.strip() for line in text.splitlines() if line.strip()]


def _summary(lines: list[str]) -> str | None:
    for line in reversed(lines):
        if _TEST_SUMMARY.search(line):
            line = re.sub(r"\s+in\s+[\d.]+\s*m?s\b.*$", "", line.strip(" =-*"))
            return trim(redact(line.strip(" =-*")), MAX_DETAIL)
    return None


def _exit_code(response: Mapping[str, Any]) -> int | None:
    for key in ("exit_code", "exitCode", "returncode", "return_code", "returnCode", "code"):
        value = response.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _bash(event: Mapping[str, Any], tool_input: Mapping[str, Any], response: Any) -> tuple[str, str]:
    command = head_at_space(_str(tool_input.get("command")))
    shown = trim(redact_command(command), MAX_COMMAND)
    key = f"bash:{command_key(command)}"
    failed = event.get("hook_event_name") == FAILURE_EVENT
    code: int | None = None
    if failed:
        error_lines = _str(event.get("error")).splitlines()
        if error_lines and (m := _EXIT_LINE.match(error_lines[0])):
            code = int(m.group(1))
            error_lines = error_lines[1:]
        lines = _tail_lines("\n".join(error_lines))
        if event.get("is_interrupt") is True:
            return f"Ran {shown}: interrupted", key
    else:
        result = _dict(response)
        if result.get("interrupted") is True:
            return f"Ran {shown}: interrupted", key
        if tool_input.get("run_in_background") is True or result.get("backgroundTaskId"):
            return f"Ran {shown}: started in background", key
        code = _exit_code(result)
        failed = code is not None and code != 0
        text = response if isinstance(response, str) else ""
        lines = _tail_lines(_str(result.get("stdout")), _str(result.get("stderr")), text)
    summary = _summary(lines)
    if not failed:
        return f"Ran {shown}: {summary or 'ok'}", key
    status = f"exit {code}" if code is not None else "failed"
    if summary:
        return f"Ran {shown}: {summary} ({status})", key
    last = trim(redact(lines[-1]), MAX_DETAIL) if lines else ""
    return f"Ran {shown}: {status}" + (f": {last}" if last else ""), key


# --------------------------------------------------------------------------------------------- web


def safe_url(url: str) -> tuple[str, str]:
    """(scheme://host/path without credentials, query or fragment, host)."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return trim(redact(url), MAX_COMMAND), "?"
    if not parts.scheme or not host:
        return trim(redact(url.split("?", 1)[0]), MAX_COMMAND), "?"
    return trim(redact(f"{parts.scheme}://{host}{port}{parts.path}"), MAX_COMMAND), host


def _fetch(tool_input: Mapping[str, Any], response: Mapping[str, Any]) -> tuple[str, str]:
    shown, host = safe_url(head_at_space(_str(tool_input.get("url"))))
    code = response.get("code")
    status = f" (HTTP {code})" if isinstance(code, int) and not isinstance(code, bool) and code >= 400 else ""
    return f"Fetched {shown}{status}", f"fetch:{host}"


# -------------------------------------------------------------------------------------------- main


def _failed_other(tool: str, target: str, event: Mapping[str, Any], key: str) -> tuple[str, str]:
    lines = _tail_lines(_str(event.get("error")))
    reason = trim(redact(lines[0]), MAX_DETAIL) if lines else "error"
    return f"{tool} failed on {target}: {reason}", key


def observe(event: Mapping[str, Any], base: str | None = None) -> Observation | None:
    """The observation for a tool event, or None when the tool is skipped or the event is not one.

    `base` is the directory paths are shown relative to (the project directory or the event's cwd).
    """
    tool = _str(event.get("tool_name")).strip()
    if not tool or tool in SKIPPED_TOOLS:
        return None
    if tool.startswith("mcp__"):
        server, _, name = tool[len("mcp__"):].partition("__")
        if name in OWN_MCP_TOOLS:
            return None
    tool_input = _dict(event.get("tool_input"))
    response = event.get("tool_response")
    failed = event.get("hook_event_name") == FAILURE_EVENT

    if tool in ("Edit", "MultiEdit"):
        content, key = _edit(tool, tool_input, base)
        if failed:
            target = display_path(_str(tool_input.get("file_path")), base)
            content, key = _failed_other(tool, target, event, key)
    elif tool == "Write":
        content, key = _write(tool_input, _dict(response), base)
        if failed:
            content, key = _failed_other(tool, key.split(":", 1)[1], event, key)
    elif tool == "Bash":
        if not _str(tool_input.get("command")).strip():
            return None
        content, key = _bash(event, tool_input, response)
    elif tool == "WebFetch":
        content, key = _fetch(tool_input, _dict(response))
        if failed:
            content, key = _failed_other(tool, content.removeprefix("Fetched "), event, key)
    elif tool == "WebSearch":
        query = trim(redact(head_at_space(_str(tool_input.get("query")))), MAX_DETAIL)
        content, key = f'Searched the web for "{query}"', "search:web"
    elif tool in ("Agent", "Task"):
        kind = trim(_str(tool_input.get("subagent_type")) or "general-purpose", 60)
        description = trim(redact(head_at_space(_str(tool_input.get("description")))), MAX_DETAIL)
        content = f"Ran subagent {kind}" + (f": {description}" if description else "")
        key = f"task:{kind}"
    elif tool == "NotebookEdit":
        shown = display_path(_str(tool_input.get("notebook_path")), base)
        mode = _str(tool_input.get("edit_mode")) or "replace"
        content, key = f"Edited notebook {shown} ({trim(mode, 20)} cell)", f"notebook:{shown}"
    elif tool.startswith("mcp__"):
        content = f"Called MCP tool {server}/{name or '?'}"
        key = f"mcp:{server}/{name}"
    else:
        target = _str(tool_input.get("file_path")) or _str(tool_input.get("path"))
        shown = display_path(target, base) if target else ""
        content = f"Used {trim(tool, 60)}" + (f" on {shown}" if shown else "")
        key = f"tool:{trim(tool, 60)}" + (f":{shown}" if shown else "")
        if failed:
            content, key = _failed_other(tool, shown or "?", event, key)
    return Observation(
        content=trim(content, MAX_CONTENT),
        tool=trim(tool, 64),
        fold_key=trim(redact(key), MAX_FOLD_KEY),
    )
