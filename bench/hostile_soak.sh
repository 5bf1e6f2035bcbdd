#!/usr/bin/env bash
# The hostile soak (docs/hostile-input.md): somm serve on digits-mlp, a steady
# stream of normal queries, first alone (baseline), then beside N hostile
# requests over REST and gRPC with slowloris connections and connection
# floods (bench_hostile_soak, bench/hostile_soak.cc). Reports the server's
# RSS idle, at its peak during the attack and after, whether it is alive,
# every normal query's fate and their p99 with and without the attack.
#
# Usage: bench/hostile_soak.sh [--requests N] [--threads T] [--normal-qps Q] [--skip-build]
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=1000000
THREADS=4
QPS=50
BUILD=1
while (($#)); do
  case "$1" in
    --requests) REQUESTS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --normal-qps) QPS="$2"; shift 2 ;;
    --skip-build) BUILD=0; shift ;;
    *) echo "usage: $0 [--requests N] [--threads T] [--normal-qps Q] [--skip-build]" >&2; exit 2 ;;
  esac
done
((BUILD)) && ninja -C build somm bench_hostile_soak >/dev/null
die() { echo "$0: $*" >&2; exit 1; }
source bench/lib.sh
OUT="$(mktemp -d "${TMPDIR:-/tmp}/somm-soak.XXXXXX")"
trap 'kill_children; rm -rf "$OUT"' EXIT
digits_repo "$OUT/repo"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
start_somm_serve soak build/somm "$OUT/serve" --repo "$OUT/repo" --log-level warn --auto-variants false
pid=$SERVED_PID http=$SERVED_HTTP_PORT grpc=$SERVED_GRPC_PORT
wait_model_ready "http://127.0.0.1:$http" digits-mlp
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
for _ in $(seq 200); do
  curl -s -o /dev/null "127.0.0.1:$http/v2/models/digits-mlp/infer" -d @models/demo/.examples/digit_3.json
done
idle=$(rss)
echo "idle RSS $((idle / 1024)) MiB"
build/bench/bench_hostile_soak --http "$http" --grpc "$grpc" --phase baseline --seconds 20 --normal-qps "$QPS" | tee "$OUT/baseline.json"
peak=0
( while kill -0 "$pid" 2>/dev/null; do r=$(rss 2>/dev/null || echo 0); echo "$r"; sleep 0.2; done ) >"$OUT/rss.txt" &
sampler=$!
status=0
build/bench/bench_hostile_soak --http "$http" --grpc "$grpc" --phase attack --requests "$REQUESTS" \
  --threads "$THREADS" --normal-qps "$QPS" | tee "$OUT/attack.json" || status=$?
sleep 1
kill "$sampler" 2>/dev/null || true
peak=$(sort -n "$OUT/rss.txt" | tail -1)
if kill -0 "$pid" 2>/dev/null; then alive=yes; else alive=no; fi
after=$(rss 2>/dev/null || echo 0)
answer=$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$http/v2/models/digits-mlp/infer" -d @models/demo/.examples/digit_3.json || true)
echo "server alive after the attack: $alive (a normal query after it: HTTP $answer)"
echo "RSS: idle $((idle / 1024)) MiB, peak during the attack $((peak / 1024)) MiB, after $((after / 1024)) MiB"
echo "server log lines (warnings and errors): $(wc -l <"$OUT/serve.stderr")"
[[ $alive == yes && $answer == 200 && $status == 0 ]]
