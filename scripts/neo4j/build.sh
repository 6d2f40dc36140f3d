#!/usr/bin/env bash
# Builds the embedded-Neo4j launcher into scripts/neo4j/target, cached: rebuilds only when
# target/neo4j-launcher.jar is missing or older than pom.xml / src / jvm.options. Safe to run
# concurrently (flock). Also records a class-data-sharing archive (target/neo4j-launcher.jsa, by
# starting Neo4j once on a throwaway store) that roughly halves the start time; if that step
# fails, run.sh simply starts without it.
# Usage: scripts/neo4j/build.sh [--force]      Env: JAVA_HOME (optional), MVN (default: mvn)
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JAR="$DIR/target/neo4j-launcher.jar"
JSA="$DIR/target/neo4j-launcher.jsa"
MVN="${MVN:-mvn}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
FORCE="${1:-}"

java_major() {
  local v
  v="$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)" || true
  case "$v" in
    1.*) echo "${v#1.}" | cut -d. -f1 ;;
    "") echo 0 ;;
    *) echo "$v" | cut -d. -f1 | cut -d- -f1 | cut -d+ -f1 ;;
  esac
}

if ! command -v "$JAVA" >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  echo "error: a Java 17+ JDK is required to build and run Neo4j (Maven needs the compiler: apt-get install openjdk-17-jdk-headless)" >&2
  exit 1
fi

jar_stale() {
  [ "$FORCE" = "--force" ] && return 0
  [ -f "$JAR" ] && [ -d "$DIR/target/lib" ] || return 0
  [ -n "$(find "$DIR/pom.xml" "$DIR/src" "$DIR/jvm.options" -newer "$JAR" -print -quit)" ]
}
jsa_stale() {
  [ -f "$JSA" ] || return 0
  [ "$JAR" -nt "$JSA" ]
}

jar_stale || jsa_stale || exit 0

mkdir -p "$DIR/target"
exec 9>"$DIR/target/.build.lock"
flock 9

if jar_stale; then   # (re-checked: another process may have built it while we waited)
  if ! command -v "$MVN" >/dev/null 2>&1; then
    echo "error: Maven is required to build the Neo4j launcher (apt-get install maven)" >&2
    exit 1
  fi
  rm -f "$JAR" "$JSA"
  # Maven's output goes to target/build.log (shown on failure): run.sh's stdout carries only
  # the launcher's "ready" line.
  if ! (cd "$DIR" && "$MVN" -q -B package -DskipTests) >"$DIR/target/build.log" 2>&1; then
    tail -n 40 "$DIR/target/build.log" >&2
    echo "error: building the Neo4j launcher failed (log: $DIR/target/build.log)" >&2
    exit 1
  fi
  touch "$JAR"
fi

if jsa_stale; then
  mapfile -t OPTS < <(grep -v -e '^\s*#' -e '^\s*$' "$DIR/jvm.options")
  TMP_HOME="$(mktemp -d)"
  rm -f "$JSA.tmp"
  if "$JAVA" -Xms64m -Xmx512m -XX:+UseSerialGC "${OPTS[@]}" -XX:ArchiveClassesAtExit="$JSA.tmp" \
       -jar "$JAR" --home "$TMP_HOME" --host 127.0.0.1 --port 0 --exit-when-ready \
       >"$DIR/target/cds.log" 2>&1 && [ -s "$JSA.tmp" ]; then
    mv -f "$JSA.tmp" "$JSA"
  else
    rm -f "$JSA.tmp"
    echo "warning: no class-data-sharing archive (see $DIR/target/cds.log); Neo4j starts slower" >&2
  fi
  rm -rf "$TMP_HOME"
fi
