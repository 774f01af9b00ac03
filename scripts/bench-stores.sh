#!/usr/bin/env bash
# Durable submissions per second on each store, measured alternately in one loop on this machine:
# a fresh server per run (no nodes, --rate-limit 0), `arbiter bench submit` one job per request.
#   scripts/bench-stores.sh [BUILD_DIR] [ROUNDS] [JOBS] [CONCURRENCY] [OTHER_ARBITER_BINARY]
# PostgreSQL is a throw-away server (build/arbiter-test-postgres: initdb + pg_ctl, fsync on,
# synchronous_commit on) in a temporary folder, a fresh database per run. Prints one JSON line per
# run: {"store": ..., "binary": ..., "server_cpu_us_per_job": ..., "postgres_cpu_us_per_job": ...,
# "result": {what bench submit printed}} (docs/benchmarks.md). CPU per job: the server's user +
# system time over the run, and that of every `postgres` process on the machine.
# With OTHER_ARBITER_BINARY (another build's arbiter), each round runs every store with both
# binaries, one after the other: compare them within a round.
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
JOBS=${3:-20000}
CONC=${4:-32}
BIN=$(realpath "$BUILD/arbiter")
BINS=("$BIN")
[ -n "${5:-}" ] && BINS+=("$(realpath "$5")")
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

# CPU time (clock ticks) of a process, and of every postgres process.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
postgres_ticks() {
  local t=0 p
  for p in $(pgrep -x postgres); do t=$((t + $(ticks "$p"))); done
  echo "$t"
}
HZ=$(getconf CLK_TCK)

K=0
run() {  # run STORE N BINARY
  local store=$1 n=$2 bin=$3 flags=()
  K=$((K + 1))
  local data="$WORK/data-$K"
  if [ "$store" = postgres ]; then
    "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U arbiter "bench_$K"
    flags=(--store "postgres://arbiter@127.0.0.1:$PGPORT/bench_$K" --leader-election off)
  fi
  "$bin" server --data-dir "$data" --listen 127.0.0.1:0 --config "$WORK/bench.yaml" \
    --rate-limit 0 "${flags[@]}" > "$WORK/server.out" 2>&1 &
  SERVER_PID=$!
  local url=""
  for _ in $(seq 1 200); do
    url=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$WORK/server.out" | head -1 | cut -d' ' -f3) || true
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$WORK/server.out" >&2; exit 1; }
  local out s0 s1 p0 p1
  s0=$(ticks "$SERVER_PID"); p0=$(postgres_ticks)
  out=$("$bin" bench submit --server "$url" --token "$(cat "$data/admin.token")" \
    --queue bench-q --jobs "$JOBS" --concurrency "$CONC" --json)
  s1=$(ticks "$SERVER_PID"); p1=$(postgres_ticks)
  kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
  echo "{\"store\": \"$store\", \"round\": $n, \"binary\": \"$bin\"," \
    "\"server_cpu_us_per_job\": $(( (s1 - s0) * 1000000 / HZ / JOBS ))," \
    "\"postgres_cpu_us_per_job\": $(( (p1 - p0) * 1000000 / HZ / JOBS )), \"result\": $out}"
}

for n in $(seq 1 "$ROUNDS"); do
  for store in sqlite postgres; do
    for bin in "${BINS[@]}"; do run "$store" "$n" "$bin"; done
  done
done
