#!/usr/bin/env bash
# The response cache against no cache (docs/lifecycle.md): somm serve on two
# repositories that differ only in model.yaml's response_cache, the same
# query repeated (`somm bench --input`, every query after the first a hit),
# digits-mlp at 16 connections and resnet18 at 4, REST JSON; throughput,
# p50/p99, hits and misses, the cache's bytes and the server's RSS.
#
# Usage: bench/response_cache.sh [--rounds N] [--skip-build]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3
BUILD=1
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --skip-build) BUILD=0; shift ;;
    *) echo "usage: $0 [--rounds N] [--skip-build]" >&2; exit 2 ;;
  esac
done
((BUILD)) && ninja -C build somm >/dev/null
OUT="$(mktemp -d "${TMPDIR:-/tmp}/somm-cache-bench.XXXXXX")"
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
for side in on off; do
  for m in digits-mlp resnet18; do
    mkdir -p "$OUT/$side/$m"
    cp "models/demo/$m/model.yaml" "$OUT/$side/$m/"
    ln -s "$PWD/models/demo/$m/1" "$OUT/$side/$m/1"
    [[ $side == on ]] && printf '\nresponse_cache: {enable: true, max_mb: 16}\n' >>"$OUT/$side/$m/model.yaml"
  done
done
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model round cache samples/s p50_us p99_us hits misses cache_bytes rss_mib"
for round in $(seq "$ROUNDS"); do
  for m in digits-mlp resnet18; do
    conc=16 input=models/demo/.examples/digit_3.json
    [[ $m == resnet18 ]] && conc=4 input=models/demo/.examples/resnet_input.json
    for side in on off; do
      build/somm serve --repo "$OUT/$side" --http-port 0 --grpc-port 0 --metrics-port 0 \
        --log-level warn --auto-variants false >"$OUT/serve.out" 2>"$OUT/serve.err" &
      pid=$!
      ports=""
      for _ in $(seq 240); do
        ports=$(grep -m1 -o 'http=[0-9]* grpc=[0-9]* metrics=[0-9]*' "$OUT/serve.out" || true)
        [[ -n $ports ]] && break
        sleep 0.5
      done
      http=$(sed 's/http=\([0-9]*\).*/\1/' <<<"$ports")
      metrics=$(sed 's/.*metrics=\([0-9]*\)/\1/' <<<"$ports")
      until curl -sf "127.0.0.1:$http/v2/models/$m/ready" >/dev/null; do sleep 0.5; done
      build/somm bench "$m" -u "127.0.0.1:$http" --input "$input" --concurrency "$conc" \
        --warmup-s 2 --window-s 3 --max-windows 4 --json "$OUT/$m-$side-$round.json" >/dev/null 2>&1
      scrape=$(curl -s "127.0.0.1:$metrics/metrics")
      metric() { awk -v n="$1" '$1 ~ "^"n"\\{" && $1 ~ "model=\"'"$m"'\"" {print $2}' <<<"$scrape"; }
      /usr/bin/python3 - "$OUT/$m-$side-$round.json" "$m" "$round" "$side" \
        "$(metric somm_response_cache_hits_total)" "$(metric somm_response_cache_misses_total)" \
        "$(metric somm_response_cache_bytes)" "$(awk '/VmRSS/ {print $2}' /proc/$pid/status)" <<'PY'
import json, sys
f, model, rnd, side, hits, misses, cache_bytes, rss_kb = sys.argv[1:]
p = json.load(open(f))["points"][0]
print(model, rnd, side, round(p["throughput_sps"], 1), p["latency_us"]["p50"], p["latency_us"]["p99"],
      hits or "-", misses or "-", cache_bytes or "-", round(int(rss_kb) / 1024))
PY
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
  done
done
rm -rf "$OUT"
