#!/usr/bin/env bash
# `make run`: the main job. Until the control plane lands this shows the scheduling core at work on a
# synthetic cluster (the same core the server will drive), and says what `make run` will start.
set -euo pipefail
BIN=${1:-build/arbiter}
cat <<'TXT'
Arbiter: the scheduling core is built.

`make run` will start `arbiter server` on its embedded default (SQLite in ./data, a built-in node
with fake GPUs) once the control plane lands. Today it runs the core once on a synthetic cluster:
TXT
echo
echo "\$ $BIN bench --nodes 64 --gpus-per-node 8 --queues 4 --jobs 2000 --policy default"
"$BIN" bench --nodes 64 --gpus-per-node 8 --queues 4 --jobs 2000 --policy default
echo
echo "At scale (what docs/benchmarks.md records):"
echo "  $BIN bench --nodes 10000 --gpus-per-node 8 --queues 100 --jobs 200000 --policy binpack --json"
