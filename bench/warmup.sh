#!/usr/bin/env bash
# Warm-up against none (docs/lifecycle.md): resnet18's first queries after
# `somm serve` loads it, with model.yaml's warmup at its minimum (one run,
# the signature check), the default (two runs at batch 1) and a longer one
# (five runs at batch 1 and 8). Each repeat starts a fresh server; the
# latencies are curl's, on loopback, of the same 1.6 MB JSON body.
#
# Usage: bench/warmup.sh [--repeats N] [--skip-build]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=3
BUILD=1
while (($#)); do
  case "$1" in
    --repeats) REPEATS="$2"; shift 2 ;;
    --skip-build) BUILD=0; shift ;;
    *) echo "usage: $0 [--repeats N] [--skip-build]" >&2; exit 2 ;;
  esac
done
((BUILD)) && ninja -C build somm >/dev/null
OUT="$(mktemp -d "${TMPDIR:-/tmp}/somm-warmup.XXXXXX")"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT
declare -A WARMUP=([minimum]="warmup: {runs: 0}" [default]="" [long]="warmup: {runs: 5, batch_sizes: [1, 8]}")
for name in minimum default long; do
  mkdir -p "$OUT/$name/resnet18"
  cp models/demo/resnet18/model.yaml "$OUT/$name/resnet18/"
  ln -s "$PWD/models/demo/resnet18/1" "$OUT/$name/resnet18/1"
  [[ -n ${WARMUP[$name]} ]] && printf '\n%s\n' "${WARMUP[$name]}" >>"$OUT/$name/resnet18/model.yaml"
done
BODY=models/demo/.examples/resnet_input.json
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "warmup repeat load_ms first_ms second_ms third_ms tenth_ms"
for r in $(seq "$REPEATS"); do
  for name in minimum default long; do
    build/somm serve --repo "$OUT/$name" --http-port 0 --grpc-port 0 --metrics-port 0 --log-level info \
      --auto-variants false --managed false >"$OUT/serve.out" 2>"$OUT/serve.err" &
    pid=$!
    port=""
    for _ in $(seq 240); do
      port=$(grep -m1 -o 'http=[0-9]*' "$OUT/serve.out" | cut -d= -f2 || true)
      [[ -n $port ]] && break
      sleep 0.25
    done
    until curl -sf "127.0.0.1:$port/v2/models/resnet18/ready" >/dev/null; do sleep 0.1; done
    load_ms=$(grep -o 'loaded model resnet18 version 1 ([^,]*, [0-9]* ms' "$OUT/serve.err" | grep -o '[0-9]* ms' | cut -d' ' -f1)
    times=()
    for i in $(seq 10); do
      t=$(curl -s -o /dev/null -w '%{time_total}' "127.0.0.1:$port/v2/models/resnet18/infer" \
            -H 'Content-Type: application/json' --data-binary @"$BODY")
      times+=("$(awk -v t="$t" 'BEGIN {printf "%.1f", t * 1000}')")
    done
    echo "$name $r ${load_ms:--} ${times[0]} ${times[1]} ${times[2]} ${times[9]}"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
