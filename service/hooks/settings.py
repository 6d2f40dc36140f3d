"""The hooks' configuration, read from the environment Claude Code gives a hook command.

A frozen dataclass over `os.environ`, not a pydantic-settings class: importing pydantic-settings and
httpx costs ~0.22 s on a 2-core machine (measured: `python -c "import httpx, pydantic_settings"`
0.22-0.25 s against 0.04 s for the standard library alone), which is most of post-tool-use's 300 ms
budget. The hooks therefore use the standard library only, which also lets them run under any
Python 3.11+ (the plugin's cached copy has no virtualenv).

| variable | default | meaning |
|---|---|---|
| `MEMORY_URL` | `MEMORY_API_URL`, else `http://127.0.0.1:8199` | the REST API |
| `MEMORY_API_KEY` | unset | sent as `Authorization: Bearer ...` when set |
| `MEMORY_USER_ID` | unset | sent as `user_id` when set (needed with `AUTH_MODE=none`) |
| `MEMORY_PROJECT_ID` | unset | overrides the project id found from `cwd` |
| `MEMORY_CONTEXT_CHARS` | 4000 | session-start's context budget, clamped to 200..10000 |
| `MEMORY_HOOKS_DISABLED` | unset | `1`/`true`: every command does nothing |
| `MEMORY_HOOKS_DEBUG` | unset | `1`/`true`: errors are written to stderr (never to stdout) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_URL = "http://127.0.0.1:8199"
DEFAULT_CONTEXT_CHARS = 4000
# The API accepts max_chars >= 200; Claude Code caps a hook's additionalContext at 10,000 characters
# (a longer string is saved to a file and replaced by a preview).
MIN_CONTEXT_CHARS = 200
MAX_CONTEXT_CHARS = 10_000

_TRUE = {"1", "true", "yes", "on"}


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def _clean(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


@dataclass(frozen=True)
class HookSettings:
    url: str = DEFAULT_URL
    api_key: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    context_chars: int = DEFAULT_CONTEXT_CHARS
    disabled: bool = False
    debug: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HookSettings:
        env = os.environ if env is None else env
        url = _clean(env.get("MEMORY_URL")) or _clean(env.get("MEMORY_API_URL")) or DEFAULT_URL
        try:
            chars = int((env.get("MEMORY_CONTEXT_CHARS") or "").strip() or DEFAULT_CONTEXT_CHARS)
        except ValueError:
            chars = DEFAULT_CONTEXT_CHARS
        return cls(
            url=url.rstrip("/"),
            api_key=_clean(env.get("MEMORY_API_KEY")),
            user_id=_clean(env.get("MEMORY_USER_ID")),
            project_id=_clean(env.get("MEMORY_PROJECT_ID")),
            context_chars=max(MIN_CONTEXT_CHARS, min(MAX_CONTEXT_CHARS, chars)),
            disabled=_flag(env.get("MEMORY_HOOKS_DISABLED")),
            debug=_flag(env.get("MEMORY_HOOKS_DEBUG")),
        )
