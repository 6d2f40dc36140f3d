"""`python -m service.hooks <command>`: run one hook command on the event JSON read from stdin.

Commands: `session-start`, `post-tool-use` (also used for PostToolUseFailure events), `stop`. The
exit status is always 0, whatever happens (unknown command, malformed stdin, service down): a hook
must never fail the agent. With `MEMORY_HOOKS_DEBUG=1` errors are written to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Sequence

COMMANDS = ("session-start", "post-tool-use", "stop")


def _debug() -> bool:
    return os.environ.get("MEMORY_HOOKS_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


def run(argv: Sequence[str]) -> None:
    from service.hooks import commands
    from service.hooks.settings import HookSettings

    if len(argv) != 1 or argv[0] not in COMMANDS:
        if any(a in ("-h", "--help") for a in argv):
            sys.stderr.write(f"usage: python -m service.hooks {{{','.join(COMMANDS)}}} < event.json\n")
        return
    settings = HookSettings.from_env()
    if settings.disabled:
        return
    env = dict(os.environ)
    event = commands.read_event()
    if argv[0] == "session-start":
        commands.session_start(settings, event, env, sys.stdout)
    elif argv[0] == "post-tool-use":
        commands.post_tool_use(settings, event, env)
    else:
        commands.stop(settings, event, env)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; always 0. Nothing escapes, not even KeyboardInterrupt or a closed stdout."""
    try:
        run(sys.argv[1:] if argv is None else argv)
    except BaseException:
        if _debug():
            with contextlib.suppress(Exception):
                traceback.print_exc()
    return 0


if __name__ == "__main__":
    code = main()
    with contextlib.suppress(Exception):  # a closed stdout (BrokenPipe) must not become an exit status
        sys.stdout.flush()
    os._exit(code)
