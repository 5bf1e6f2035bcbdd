#!/usr/bin/env bash
# Overload (docs/hostile-input.md): digits-mlp's capacity on this machine (closed
# loop, REST JSON, every query with a latency SLO), then an open-loop
# Poisson load at 3x that capacity for --seconds, then 0.5x right after.
# somm must shed what it cannot serve within the SLO (429 /
# RESOURCE_EXHAUSTED, or the SLO's own refusal) rather than queue without
# bound, keep its RSS bounded, and recover as soon as the load falls: the
# 0.5x phase's answers all succeed within the SLO. Reports each phase's
# offered and served rate, errors by code, p50/p99 of the answers, and the
# server's RSS idle and at its peak.
#
# somm sheds before decoding: an inference request that finds --max-inflight
# requests in flight gets 429 / RESOURCE_EXHAUSTED at once (counted in
# somm_shed_total, printed at the end). --max-inflight N passes N to somm
# serve (0 = no bound); without it the server's default applies.
#
# --senders: the load generator's connections in the overload phases (one
# query in flight each). Past the batchers' queue bound (1024) the excess
# reaches the server, as from many clients at once; with fewer, it waits in
# the load generator and the server never sees the overload.
#
# --protocol grpc sends every phase over gRPC (ModelInfer) instead of REST
# JSON; the refusals are then RESOURCE_EXHAUSTED.
#
# Usage: bench/overload.sh [--seconds S] [--slo-ms MS] [--senders N] [--max-inflight N]
#                          [--protocol http|grpc] [--skip-build]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_PHASE=20
SLO=20
SENDERS=2048
BUILD=1
SERVE_ARGS=()
PROTOCOL=http
while (($#)); do
  case "$1" in
    --seconds) SECONDS_PER_PHASE="$2"; shift 2 ;;
    --slo-ms) SLO="$2"; shift 2 ;;
    --senders) SENDERS="$2"; shift 2 ;;
    --max-inflight) SERVE_ARGS+=(--max-inflight "$2"); shift 2 ;;
    --protocol) PROTOCOL="$2"; shift 2 ;;
    --skip-build) BUILD=0; shift ;;
    *) echo "usage: $0 [--seconds S] [--slo-ms MS] [--senders N] [--max-inflight N] [--protocol http|grpc] [--skip-build]" >&2; exit 2 ;;
  esac
done
((BUILD)) && ninja -C build somm >/dev/null
die() { echo "$0: $*" >&2; exit 1; }
source bench/lib.sh
OUT="$(mktemp -d "${TMPDIR:-/tmp}/somm-overload.XXXXXX")"
trap 'kill_children; rm -rf "$OUT"' EXIT
digits_repo "$OUT/repo"
# Every query carries its SLO to the server (`somm bench --send-slo`; with
# --slo-ms alone it only judges the answers): the server can refuse what it
# cannot answer in time. SLO_BODY is the same query with its SLO in the body,
# for curl.
BODY=models/demo/.examples/digit_3.json
SLO_BODY="$OUT/digit_3_slo.json"
/usr/bin/python3 - "$BODY" "$SLO" "$SLO_BODY" <<'PY'
import json, sys
src, slo, out = sys.argv[1:]
body = json.load(open(src))
body.setdefault("parameters", {})["latency_slo_ms"] = float(slo)
json.dump(body, open(out, "w"))
PY
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
# Every sender comes from 127.0.0.1: the per-address connection cap (1,024 by
# default) would refuse what this bench means to offer.
start_somm_serve overload build/somm "$OUT/serve" --repo "$OUT/repo" --log-level warn \
  --max-connections-per-address 0 ${SERVE_ARGS[@]+"${SERVE_ARGS[@]}"}
pid=$SERVED_PID http=$SERVED_HTTP_PORT metrics=$SERVED_METRICS_PORT
case "$PROTOCOL" in
  http) target=(-u "127.0.0.1:$http" -i http) ;;
  grpc) target=(-u "127.0.0.1:$SERVED_GRPC_PORT" -i grpc) ;;
  *) die "--protocol is http or grpc, not '$PROTOCOL'" ;;
esac
echo "protocol: $PROTOCOL"
wait_model_ready "http://127.0.0.1:$http" digits-mlp
# A query with an SLO needs profiled variants: somm profiles the repository's
# model at start; wait until one such query is answered.
for _ in $(seq 240); do
  curl -sf "http://127.0.0.1:$http/v2/models/digits-mlp/infer" -d @"$SLO_BODY" >/dev/null && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$http/v2/models/digits-mlp/infer" -d @"$SLO_BODY" >/dev/null ||
  die "digits-mlp never answered a query with an SLO (no profiles?)"
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
( while kill -0 "$pid" 2>/dev/null; do rss 2>/dev/null || true; sleep 0.2; done ) >"$OUT/rss.txt" &
PIDS+=($!)
summary() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
phase, path = sys.argv[1:]
p = json.load(open(path))["points"][0]
offered = p["request_rate"] or p["throughput_qps"]
ok = p["count"]
errors = p["errors"]
lat = p["latency_us"]
print(f"{phase}: offered {offered:.0f} q/s, answered OK {ok} in {p['duration_s']:.1f} s "
      f"({p['throughput_qps']:.0f} q/s), errors {json.dumps(errors)}, p50 {lat['p50']} us, "
      f"p99 {lat['p99']} us, SLO attainment {p['slo_attainment']}")
PY
}
build/somm bench digits-mlp "${target[@]}" --input "$BODY" \
  --concurrency 32 --slo-ms "$SLO" --send-slo --warmup-s 2 --window-s 3 --max-windows 4 --json "$OUT/capacity.json" >/dev/null 2>&1
idle=$(rss)
capacity=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["points"][0]["throughput_qps"])' "$OUT/capacity.json")
summary "capacity (closed loop, 32 connections)" "$OUT/capacity.json"
for phase in 3.0 0.5; do
  rate=$(awk -v c="$capacity" -v f="$phase" 'BEGIN {printf "%.0f", c * f}')
  cpu0=$(cpu_s "$pid")
  build/somm bench digits-mlp "${target[@]}" --input "$BODY" \
    --request-rate "$rate" --duration-s "$SECONDS_PER_PHASE" --senders "$SENDERS" --slo-ms "$SLO" --send-slo \
    --warmup-s 0 --json "$OUT/phase-$phase.json" >/dev/null 2>&1 || true
  summary "${phase}x capacity" "$OUT/phase-$phase.json"
  # The server's share of the two cores: the rest went to the load generator.
  echo "  server CPU: $(awk -v a="$cpu0" -v b="$(cpu_s "$pid")" -v s="$SECONDS_PER_PHASE" \
    'BEGIN {printf "%.1f s, %.2f cores", b - a, (b - a) / s}')"
done
echo "shed before decoding (somm_shed_total): $(curl -s "http://127.0.0.1:$metrics/metrics" |
  awk '/^somm_shed_total/ {printf "%s%s %d", sep, $1, $2; sep = ", "}')"
peak=$(sort -n "$OUT/rss.txt" | tail -1)
echo "RSS: idle $((idle / 1024)) MiB, peak $((peak / 1024)) MiB, after $(( $(rss) / 1024 )) MiB"
kill -0 "$pid" && echo "server alive"
