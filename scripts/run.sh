#!/usr/bin/env bash
# `make run`: starts an Arbiter server on its embedded default: SQLite in ./data, the demo
# configuration (deploy/demo.yaml: two tenants, three priority classes, one 8-GPU node) applied on
# the first start only: later starts keep what an admin changed.
# Override with ARBITER_LISTEN (default 127.0.0.1:8080), ARBITER_GATEWAY_LISTEN (the gateway of
# services, default 127.0.0.1:8081), ARBITER_DATA (default ./data).
set -euo pipefail
BIN=${1:-build/arbiter}
LISTEN=${ARBITER_LISTEN:-127.0.0.1:8080}
GATEWAY=${ARBITER_GATEWAY_LISTEN:-127.0.0.1:8081}
DATA=${ARBITER_DATA:-data}
URL="http://${LISTEN}"
cat <<TXT
Arbiter server
  console    ${URL}/   (sign in with the token in ${DATA}/admin.token)
  API        ${URL}/api/v1   (OpenAPI document: ${URL}/api/v1/openapi.json)
  gateway    http://${GATEWAY}/s/NAME/   (online services; docs/services.md)
  data       ${DATA}/arbiter.db, admin token in ${DATA}/admin.token
  config     deploy/demo.yaml on a first start (tenants vision and speech, queues vision-train,
             vision-dev, speech-train); later starts keep the data dir's own configuration

Submit a first job (from another terminal):
  cat ${DATA}/admin.token | ${BIN} login --server ${URL}
  ${BIN} submit --queue vision-train --gpus 2 -- sh -c 'echo GPUs \$CUDA_VISIBLE_DEVICES; sleep 5'
  ${BIN} jobs; ${BIN} logs 1 -f; ${BIN} top           # state, output, the live cluster
  ${BIN} report usage --since 1h --by queue           # who used how much
Or with curl:
  export ARBITER_TOKEN=\$(cat ${DATA}/admin.token)
  curl -s -H "Authorization: Bearer \$ARBITER_TOKEN" -X POST ${URL}/api/v1/jobs \\
       -d '{"queue": "vision-train", "command": ["sh", "-c", "echo GPUs \$CUDA_VISIBLE_DEVICES; sleep 5"],
            "resources": {"gpus": 2}}'
  curl -s -H "Authorization: Bearer \$ARBITER_TOKEN" ${URL}/metrics        # Prometheus metrics

Run a service (two replicas of a small HTTP server) and call it through the gateway:
  ${BIN} apply -f deploy/hello-service.yaml; ${BIN} service show hello
  curl -s http://${GATEWAY}/s/hello/
or one that scales with its load, from zero (the first request starts a replica):
  ${BIN} apply -f deploy/autoscaled-service.yaml; curl -s http://${GATEWAY}/s/echo/

The built-in node "local" (8 fake GPUs) runs each task as a confined process (its own uid where
the server runs as root, a clean environment, CUDA_VISIBLE_DEVICES set to its GPUs); its folders
are in ${DATA}-node. Ctrl-C stops the server; running tasks keep running and the next start
adopts them.

TXT
exec "$BIN" server --data-dir "$DATA" --listen "$LISTEN" --initial-config deploy/demo.yaml --local-node local \
  --gateway-listen "$GATEWAY"
