#!/usr/bin/env bash
# Install what the tests need, start Redis and Neo4j on test ports with their own data dirs
# (never touching a dev stack), lint, type-check and run the whole suite, stop what was started.
# Exit status is non-zero on any failure. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

TEST_REDIS_PORT="${TEST_REDIS_PORT:-16379}"
TEST_NEO4J_PORT="${TEST_NEO4J_PORT:-17687}"
STACK_DIR="${TEST_STACK_DIR:-$ROOT/.test-stack}"

trap stop_started EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
prebuild_neo4j
ensure_venv dev
ensure_chromium

# Fresh test data each run when we start the services ourselves.
port_open 127.0.0.1 "$TEST_REDIS_PORT" || rm -rf "$STACK_DIR/redis"
port_open 127.0.0.1 "$TEST_NEO4J_PORT" || rm -rf "$STACK_DIR/neo4j"
start_redis "$TEST_REDIS_PORT" "$STACK_DIR/redis"
start_neo4j "$TEST_NEO4J_PORT" "$STACK_DIR/neo4j" memory

export TEST_REDIS_URL="redis://127.0.0.1:$TEST_REDIS_PORT/0"
export TEST_NEO4J_URI="bolt://127.0.0.1:$TEST_NEO4J_PORT"
export TEST_NEO4J_DATABASE=memory

say "ruff"
"$VENV/bin/ruff" check service worker tests scripts
say "mypy"
"$VENV/bin/mypy"
say "pytest"
"$PY" -m pytest -q "$@"
