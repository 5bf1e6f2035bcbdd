#!/usr/bin/env bash
# The REST JSON wire at its fastest: `wrk -t1` (one load-generator thread,
# keep-alive connections) POSTing the demo digit to digits-mlp on one
# `somm serve`, at each concurrency given, each run three times; prints
# q/s and p99 per run and the median per concurrency. A quick, repeatable
# check of the serving path's per-query cost (bench/compare.sh is the full
# comparison). Needs Debian's `wrk`.
#
# --nginx measures the wire limit instead: somm answers the body once, then
# stops, and nginx (bench/wire_limit.sh: one worker, keep-alive, `return 200`
# with somm's bytes, checked byte for byte) takes its place under the same wrk
# runs. Needs Debian's `nginx-light`.
#
# Usage: bench/wrk_rest.sh [--duration-s S] [--connections "16 32"] [--runs N]
#          [--model M] [--body FILE] [--nginx]
# Environment: SOMM_BUILD_DIR=<dir> (default build), SOMM_REPO=<dir>
# (default models/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "wrk_rest.sh: $*" >&2; exit 1; }
source bench/lib.sh
source bench/wire_limit.sh

duration=10 connections="16 32" runs=3 model=digits-mlp body=models/demo/.examples/digit_3.json
nginx=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration-s) duration="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --body) body="$2"; shift 2 ;;
    --nginx) nginx=1; shift ;;
    *) die "unknown argument $1" ;;
  esac
done
command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"
build="${SOMM_BUILD_DIR:-build}" repo="${SOMM_REPO:-models/demo}"
[[ -f "$body" ]] || die "no request body $body (scripts/setup makes the demo repository)"
out="$(mktemp -d)"
wrk_post_script "$out/post.lua" "$body"
start_somm_serve wrk "$build/somm" "$out/somm" --model-repository "$repo" --auto-variants false
url="http://127.0.0.1:$SERVED_HTTP_PORT/v2/models/$model/infer"
curl -sf -d @"$body" "$url" >/dev/null || die "the first query failed"
server="binary $build/somm (checkout at $(git -C "$build/.." rev-parse --short HEAD 2>/dev/null || echo unknown))"
if ((nginx)); then
  wire_limit_capture "http://127.0.0.1:$SERVED_HTTP_PORT" "$model" "$body" "$out/nginx"
  stop_pid "$SERVED_PID"
  wire_limit_start "$out/nginx"
  wire_limit_check "$out/nginx"
  url="http://127.0.0.1:$WIRE_PORT/v2/models/$model/infer"
  server="nginx wire limit ($("$WIRE_NGINX" -v 2>&1 | sed 's/.*: //'), one worker) answering the $(wire_limit_infer_bytes "$out/nginx")-byte answer of $server"
fi
echo "$server, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, model $model"
wrk -t1 -c16 -d3s -s "$out/post.lua" "$url" >/dev/null  # warm-up
for c in $connections; do
  qps=() p99=()
  for r in $(seq "$runs"); do
    line="$(wrk -t1 -c"$c" -d"${duration}s" -s "$out/post.lua" "$url" | grep '^RESULT')"
    read -r _ q _ p_us e <<<"$line"
    [[ "$e" == 0 ]] || die "c=$c run $r: $e errors"
    p=$(awk -v u="$p_us" 'BEGIN {printf "%.3f", u / 1000}')
    echo "c=$c run $r: $q q/s, p99 $p ms"
    qps+=("$q"); p99+=("$p")
  done
  mq="$(printf '%s\n' "${qps[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
  mp="$(printf '%s\n' "${p99[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
  echo "c=$c median: $mq q/s, p99 $mp ms"
done
if ((nginx)); then
  wire_limit_check "$out/nginx"  # still the same bytes after the load
  stop_pid "$WIRE_PID"
fi
rm -rf "$out"
