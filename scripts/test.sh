#!/usr/bin/env bash
# Install what the tests need, start Redis and Neo4j on test ports with their own data dirs
# (never touching a dev stack), lint, type-check and run the whole suite, stop what was started.
# Exit status is non-zero on any failure. Extra arguments go to pytest.
#   ./scripts/test.sh --unit    the fast lane: lint, type-check and tests/unit only, no service started
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

TEST_REDIS_PORT="${TEST_REDIS_PORT:-16379}"
TEST_NEO4J_PORT="${TEST_NEO4J_PORT:-17687}"
STACK_DIR="${TEST_STACK_DIR:-$ROOT/.test-stack}"
# Test processes: 2 by default (pytest-xdist, whole files per process, taken in tests/conftest.py's order: the files
# that mostly wait, longest first, so their waits overlap the other process's work), each process with a Redis and
# a Neo4j of its own on the next ports (tests/conftest.py picks its pair from TEST_REDIS_URLS / TEST_NEO4J_URIS).
# A third process on two cores was measured (541 -> 499-512 s) and left out: the machine then has no spare CPU, and
# the session-start hook's 1.5 s budget ran out once. TEST_WORKERS=1: one process, one Redis, one Neo4j.
TEST_WORKERS="${TEST_WORKERS:-2}"
# The test Neo4j servers (and those the tests and benches start themselves) live minutes, not days: the JVM's C1
# compiler alone costs them about a quarter less CPU than C1+C2 for the same tests (measured: 100 -> 73 CPU-s over
# five graph-heavy files), and the suite keeps two cores busy. scripts/dev.sh keeps the JVM's default.
export NEO4J_JAVA_OPTS="${NEO4J_JAVA_OPTS:--XX:TieredStopAtLevel=1}"

trap stop_started EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
unit=0
if [ "${1:-}" = "--unit" ]; then unit=1; shift; fi
[ "$unit" = 1 ] || prebuild_neo4j
ensure_venv dev
# The default embedding model's files for the tests that load it (tests/conftest.py: MODEL_CACHE).
MODEL_CACHE_DIR="$ROOT/.test-stack/models" "$PY" -m service models fetch >/dev/null \
    || die "could not fetch the embedding model (python -m service models fetch)"
if [ "$unit" = 1 ]; then
    say "ruff"
    "$VENV/bin/ruff" check service worker tests scripts
    say "mypy"
    "$VENV/bin/mypy"
    say "pytest (unit)"
    exec "$PY" -m pytest -q tests/unit "$@"
fi
ensure_chromium

# Fresh test data each run when we start the services ourselves.
redis_urls=() neo4j_uris=()
for ((i = 0; i < TEST_WORKERS; i++)); do
    suffix="${i/#0/}"  # worker 0 keeps the plain names: .test-stack/redis, .test-stack/neo4j
    rport=$((TEST_REDIS_PORT + i)) nport=$((TEST_NEO4J_PORT + i))
    port_open 127.0.0.1 "$rport" || rm -rf "$STACK_DIR/redis$suffix"
    port_open 127.0.0.1 "$nport" || rm -rf "$STACK_DIR/neo4j$suffix"
    start_redis "$rport" "$STACK_DIR/redis$suffix"
    launch_neo4j "$nport" "$STACK_DIR/neo4j$suffix" memory  # the Neo4j servers start together
    redis_urls+=("redis://127.0.0.1:$rport/0") neo4j_uris+=("bolt://127.0.0.1:$nport")
done
for ((i = 0; i < TEST_WORKERS; i++)); do
    suffix="${i/#0/}"
    await_neo4j $((TEST_NEO4J_PORT + i)) "$STACK_DIR/neo4j$suffix"
done

export TEST_REDIS_URL="${redis_urls[0]}"
export TEST_NEO4J_URI="${neo4j_uris[0]}"
export TEST_NEO4J_DATABASE=memory
TEST_REDIS_URLS="$(IFS=,; echo "${redis_urls[*]}")"
TEST_NEO4J_URIS="$(IFS=,; echo "${neo4j_uris[*]}")"
export TEST_REDIS_URLS TEST_NEO4J_URIS
parallel=()
[ "$TEST_WORKERS" -gt 1 ] && parallel=(-n "$TEST_WORKERS" --dist loadfile --no-loadscope-reorder)

say "ruff"
"$VENV/bin/ruff" check service worker tests scripts
say "mypy"
"$VENV/bin/mypy"
if [ "$#" -gt 0 ]; then  # files or options named: exactly those
    say "pytest"
    "$PY" -m pytest -q --durations=25 ${parallel[@]+"${parallel[@]}"} "$@"
    exit 0
fi
say "pytest"
"$PY" -m pytest -q --durations=25 ${parallel[@]+"${parallel[@]}"} --ignore=tests/starvation \
    --ignore=tests/benches  # the slowest 25
# Every bench's smoke run (its own services, private stacks, CPU load) after the others, so it cannot flake them.
say "pytest (bench smokes, after the others)"
# One bench per free process (not whole files: the smokes are few and long; 143 -> 104 s), two at a time at most:
# each starts processes of its own, and a third beside them made the phase slower (112 s).
bench_workers=$((TEST_WORKERS < 2 ? TEST_WORKERS : 2))
bench_parallel=()
[ "$bench_workers" -gt 1 ] && bench_parallel=(-n "$bench_workers" --dist load)
"$PY" -m pytest -q --durations=10 ${bench_parallel[@]+"${bench_parallel[@]}"} tests/benches
# The tests that hog the CPU on purpose run last and alone (one process), where they cannot slow or flake the others.
say "pytest (starvation, alone)"
"$PY" -m pytest -q --durations=5 tests/starvation
