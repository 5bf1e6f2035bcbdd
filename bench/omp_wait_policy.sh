#!/usr/bin/env bash
# libgomp's wait policy against resnet18's batch-1 compute in somm
# (docs/performance.md): one `somm serve --managed false` per setting, then
# `somm bench resnet18` over gRPC at concurrency 1; ROUNDS interleaved rounds
# so that drift in the machine hits every setting alike. Prints, per setting
# and round, the client's summary row and the server-side split row
# (queue, compute, overhead p50 and means, in µs). The servers' logs go to a
# fresh temporary folder (mktemp -d), named at the start.
#
# Usage: bench/omp_wait_policy.sh            (ROUNDS=2, ports 18100-18102)
# Environment: SOMM_BUILD_DIR (default build), SOMM_REPO (default models/demo),
# ROUNDS, PORT_BASE.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SOMM="${SOMM_BUILD_DIR:-build}/somm"
REPO="${SOMM_REPO:-models/demo}"
ROUNDS="${ROUNDS:-2}"
BASE="${PORT_BASE:-18100}"
LOGS="$(mktemp -d -t omp_wait_policy.XXXXXX)"
echo "server logs: $LOGS"
run() {
  local label="$1"; shift
  env "$@" "$SOMM" serve --model-repository "$REPO" --http-port "$BASE" \
    --grpc-port $((BASE + 1)) --metrics-port $((BASE + 2)) --auto-variants false \
    --managed false >"$LOGS/$label.log" 2>&1 &
  local pid=$!
  for _ in $(seq 240); do
    curl -sf "127.0.0.1:$BASE/v2/health/ready" >/dev/null && break
    sleep 0.5
  done
  echo "== $label"
  "$SOMM" bench resnet18 -u "127.0.0.1:$((BASE + 1))" -i grpc --concurrency 1 \
    --input "$REPO/.examples/resnet_input.json" --warmup-s 2 --window-s 4 --max-windows 3 2>&1 |
    grep -E "^(load|concurrency 1 )" || true
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}
for _ in $(seq "$ROUNDS"); do
  run passive-somm-default                                  # somm serve sets PASSIVE
  run libgomp-default SOMM_ENV_REEXEC=1                     # skip somm's re-exec
  run spin10k SOMM_ENV_REEXEC=1 GOMP_SPINCOUNT=10000
  run active OMP_WAIT_POLICY=ACTIVE
done
