"""The hooks' configuration: the environment Claude Code gives a hook command, then the checkout's `.env`.

The `.env` is the one beside this package's checkout (`<plugin root>/.env`), the file `python -m service ...`
and `./scripts/dev.sh` read when run from the checkout and `python -m service.mcp` always reads; never the `.env`
of the project the agent works in. As with the service's settings, the environment wins and an empty value
counts as unset, so a `MEMORY_API_KEY` put in `.env` reaches the hooks as it reaches the CLI.

A frozen dataclass over `os.environ`, not a pydantic-settings class: importing pydantic-settings and
httpx takes most of post-tool-use's 300 ms budget on a small machine (docs/benchmarks.md). The hooks therefore
use the standard library only, which also lets them run under any Python 3.11+ (the plugin's cached copy has no
virtualenv); `read_env_file` reads `.env` lines as python-dotenv (pydantic-settings' reader) does for the forms a
settings file uses.

| variable | default | meaning |
|---|---|---|
| `MEMORY_URL` | `MEMORY_API_URL`, else `http://127.0.0.1:8199` | the REST API |
| `MEMORY_API_KEY` | unset | sent as `Authorization: Bearer ...` when set |
| `MEMORY_USER_ID` | unset | sent as `user_id` when set (needed with `AUTH_MODE=none`) |
| `MEMORY_PROJECT_ID` | unset | overrides the project id found from `cwd` |
| `MEMORY_CONTEXT_CHARS` | 4000 | session-start's context budget, clamped to 200..10000 |
| `MEMORY_CONTEXT_TOKENS` | 1000 | session-start's budget in the embedder's tokens, 50..4000; `0`: chars only |
| `MEMORY_HOOKS_DISABLED` | unset | `1`/`true`: every command does nothing |
| `MEMORY_HOOKS_DEBUG` | unset | `1`/`true`: errors are written to stderr (never to stdout) |
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CHECKOUT_ENV = Path(__file__).resolve().parents[2] / ".env"
DEFAULT_URL = "http://127.0.0.1:8199"
DEFAULT_CONTEXT_CHARS = 4000
# The API accepts max_chars >= 200; Claude Code caps a hook's additionalContext at 10,000 characters
# (a longer string is saved to a file and replaced by a preview).
MIN_CONTEXT_CHARS = 200
MAX_CONTEXT_CHARS = 10_000
DEFAULT_CONTEXT_TOKENS = 1000
MIN_CONTEXT_TOKENS = 50  # the API's minimum max_tokens
MAX_CONTEXT_TOKENS = 4000  # about what MAX_CONTEXT_CHARS holds

_TRUE = {"1", "true", "yes", "on"}


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def _clean(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*)$")


def _unquote(raw: str) -> str:
    if raw[:1] in ("'", '"'):
        quote = raw[0]
        end = raw.find(quote, 1)
        while quote == '"' and end > 0 and raw[end - 1] == "\\":  # an escaped quote inside "..."
            end = raw.find(quote, end + 1)
        if end > 0:
            inner = raw[1:end]
            return inner.replace('\\"', '"').replace("\\\\", "\\") if quote == '"' else inner
    return re.split(r"(?:^|\s+)#", raw, maxsplit=1)[0].strip()  # unquoted: ` # ...` is a comment


def read_env_file(path: Path) -> dict[str, str]:
    """`NAME=value` lines of a .env file (`export ` prefix, quotes and ` # comments` as python-dotenv reads them);
    a missing or unreadable file is empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    values: dict[str, str] = {}
    for line in text.splitlines():
        found = _ENV_LINE.match(line)  # a `# NAME=...` line is a comment: `#` cannot start a name
        if found:
            values[found.group(1)] = _unquote(found.group(2).strip())
    return values


@dataclass(frozen=True)
class HookSettings:
    url: str = DEFAULT_URL
    api_key: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    context_chars: int = DEFAULT_CONTEXT_CHARS
    context_tokens: int = DEFAULT_CONTEXT_TOKENS  # 0: no token budget
    disabled: bool = False
    debug: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, env_file: Path | None = CHECKOUT_ENV) -> HookSettings:
        """Each variable from `env` (default `os.environ`), else from `env_file` (None = no file)."""
        environ = os.environ if env is None else env
        dotenv = read_env_file(env_file) if env_file is not None else {}

        def get(name: str) -> str | None:
            return _clean(environ.get(name)) or _clean(dotenv.get(name))

        url = get("MEMORY_URL") or get("MEMORY_API_URL") or DEFAULT_URL
        try:
            chars = int(get("MEMORY_CONTEXT_CHARS") or DEFAULT_CONTEXT_CHARS)
        except ValueError:
            chars = DEFAULT_CONTEXT_CHARS
        try:
            tokens = int(get("MEMORY_CONTEXT_TOKENS") or DEFAULT_CONTEXT_TOKENS)
        except ValueError:
            tokens = DEFAULT_CONTEXT_TOKENS
        return cls(
            url=url.rstrip("/"),
            api_key=get("MEMORY_API_KEY"),
            user_id=get("MEMORY_USER_ID"),
            project_id=get("MEMORY_PROJECT_ID"),
            context_chars=max(MIN_CONTEXT_CHARS, min(MAX_CONTEXT_CHARS, chars)),
            context_tokens=0 if tokens <= 0 else max(MIN_CONTEXT_TOKENS, min(MAX_CONTEXT_TOKENS, tokens)),
            disabled=_flag(get("MEMORY_HOOKS_DISABLED")),
            debug=_flag(get("MEMORY_HOOKS_DEBUG")),
        )
