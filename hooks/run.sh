#!/bin/sh
# Entry point of the Claude Code plugin (hooks/hooks.json, .mcp.json).
#
#   sh hooks/run.sh session-start|post-tool-use|stop   a hook: python -m service.hooks <command>
#   sh hooks/run.sh mcp                                the stdio MCP server: python -m service.mcp
#
# Python: $MEMORY_PYTHON if set, else <plugin root>/.venv/bin/python, else python3, else python. The
# hooks use only the standard library, so any Python 3.11+ runs them; the MCP server needs this
# project's dependencies (set MEMORY_PYTHON=/path/to/checkout/.venv/bin/python when the plugin's
# copy has no .venv, e.g. when it was installed from a git URL).
#
# The command runs from the plugin root, so `service` is this plugin's package and not a `service`
# package of the user's project; the project's directory is passed on in MEMORY_HOOKS_CWD. A hook
# always exits 0: a missing Python or a broken install must never fail the agent.
ROOT="${CLAUDE_PLUGIN_ROOT:-$(cd "$(dirname "$0")/.." 2>/dev/null && pwd)}"
MEMORY_HOOKS_CWD="${MEMORY_HOOKS_CWD:-$PWD}"
export MEMORY_HOOKS_CWD

PY=""
for candidate in "${MEMORY_PYTHON:-}" "$ROOT/.venv/bin/python" python3 python; do
    if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1; then
        PY="$candidate"
        break
    fi
done

if [ "${1:-}" = "mcp" ]; then
    [ -n "$PY" ] || { echo "memory plugin: no Python found; set MEMORY_PYTHON" >&2; exit 1; }
    cd "$ROOT" || exit 1
    MEMORY_API_URL="${MEMORY_API_URL:-${MEMORY_URL:-http://127.0.0.1:8199}}"
    export MEMORY_API_URL
    exec "$PY" -m service.mcp
fi

[ -n "$PY" ] || exit 0
cd "$ROOT" 2>/dev/null || exit 0
"$PY" -m service.hooks "$@"
exit 0
