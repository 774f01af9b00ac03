#!/usr/bin/env bash
# Durable submissions per second on each store, measured alternately in one loop on this machine:
# a fresh server per run (no nodes, --rate-limit 0), `arbiter bench submit` one job per request.
#   scripts/bench-stores.sh [BUILD_DIR] [ROUNDS] [JOBS] [CONCURRENCY]
# PostgreSQL is a throw-away server (build/arbiter-test-postgres: initdb + pg_ctl, fsync on,
# synchronous_commit on) in a temporary folder, a fresh database per run. Prints one JSON line per
# run: {"store": ..., "jobs_per_s": ..., ...} (docs/benchmarks.md).
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
JOBS=${3:-20000}
CONC=${4:-32}
BIN=$(realpath "$BUILD/arbiter")
PGFIX=$(realpath "$BUILD/arbiter-test-postgres")
WORK=$(mktemp -d /tmp/arbiter-bench-stores.XXXXXX)
chmod 0755 "$WORK"
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
  "$PGFIX" stop "$WORK/pg" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$PGFIX" start "$WORK/pg" >/dev/null
PGPORT=$(cat "$WORK/pg/port")
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort | tail -1)
cat > "$WORK/bench.yaml" <<'YAML'
tenants:
  - name: bench
    queues:
      - {name: bench-q, guaranteed: {gpu: 0}, max: {gpu: 8}}
YAML

run() {  # run STORE N
  local store=$1 n=$2 data="$WORK/data-$1-$2" flags=()
  if [ "$store" = postgres ]; then
    "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U arbiter "bench_$n"
    flags=(--store "postgres://arbiter@127.0.0.1:$PGPORT/bench_$n" --leader-election off)
  fi
  "$BIN" server --data-dir "$data" --listen 127.0.0.1:0 --config "$WORK/bench.yaml" \
    --rate-limit 0 "${flags[@]}" > "$WORK/server.out" 2>&1 &
  SERVER_PID=$!
  local url=""
  for _ in $(seq 1 200); do
    url=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$WORK/server.out" | head -1 | cut -d' ' -f3) || true
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$WORK/server.out" >&2; exit 1; }
  local out
  out=$("$BIN" bench submit --server "$url" --token "$(cat "$data/admin.token")" \
    --queue bench-q --jobs "$JOBS" --concurrency "$CONC" --json)
  kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
  echo "{\"store\": \"$store\", \"round\": $n, \"result\": $out}"
}

for n in $(seq 1 "$ROUNDS"); do
  run sqlite "$n"
  run postgres "$n"
done
