#!/usr/bin/env bash
# Runs Neo4j Community (embedded, Bolt only) in the foreground; builds the launcher first if needed.
#
#   scripts/neo4j/run.sh --home DIR --port PORT [--host 127.0.0.1] [--database memory]
#                        [--password PW] [--heap 512m] [--pagecache 128m] [--tx-memory SIZE]
#
# No --password: auth disabled. With --password: auth enabled, user "neo4j" gets PW (also on an
# existing store). The password reaches java via the env var NEO4J_LAUNCHER_PASSWORD, not argv;
# a caller may set that variable itself instead of passing --password.
# NEO4J_INITIAL_HEAP (default 64m) is the JVM's initial heap (-Xms); NEO4J_GC (default G1) its garbage
# collector, Serial or G1 (docs/benchmarks.md, "A soak at constant data"); NEO4J_JAVA_OPTS (default empty)
# more JVM flags, split on spaces and put last, so they win over the ones above (e.g. "-XX:+AlwaysPreTouch").
# Prints "neo4j ready bolt://HOST:PORT db=NAME" on stdout once Bolt serves queries; Neo4j's logs
# go to DIR/logs; errors are one "error: ..." line on stderr and a non-zero exit.
# The java process replaces this script (exec): SIGTERM/SIGINT to its pid stops Neo4j cleanly.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

HEAP="512m"
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --heap)
      [ $# -ge 2 ] || { echo "error: missing value for --heap" >&2; exit 2; }
      HEAP="$2"; shift 2 ;;
    --heap=*) HEAP="${1#--heap=}"; shift ;;
    --password)  # handed over in the environment: keeps it out of ps and Neo4j's debug.log
      [ $# -ge 2 ] || { echo "error: missing value for --password" >&2; exit 2; }
      export NEO4J_LAUNCHER_PASSWORD="$2"; shift 2 ;;
    --password=*) export NEO4J_LAUNCHER_PASSWORD="${1#--password=}"; shift ;;
    --*=*) ARGS+=("${1%%=*}" "${1#*=}"); shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

GC="${NEO4J_GC:-G1}"
case "$GC" in
  Serial|G1) ;;
  *) echo "error: NEO4J_GC must be Serial or G1 (got $GC)" >&2; exit 2 ;;
esac

"$DIR/build.sh"   # checks Java 17+ / Maven; a no-op when the build is up to date

JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
mapfile -t OPTS < <(grep -v -e '^\s*#' -e '^\s*$' "$DIR/jvm.options")
if [ -f "$DIR/target/neo4j-launcher.jsa" ]; then
  OPTS+=("-XX:SharedArchiveFile=$DIR/target/neo4j-launcher.jsa")  # ignored by the JVM if unusable
fi
INITIAL_HEAP="${NEO4J_INITIAL_HEAP:-64m}"  # -Xms; the heap grows from it to --heap (-Xmx)
read -r -a EXTRA <<< "${NEO4J_JAVA_OPTS:-}"
exec "$JAVA" -Xms"$INITIAL_HEAP" -Xmx"$HEAP" -XX:+Use"$GC"GC "${OPTS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} \
  -jar "$DIR/target/neo4j-launcher.jar" ${ARGS[@]+"${ARGS[@]}"}
