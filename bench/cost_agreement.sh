#!/usr/bin/env bash
# Predicted against reported cost, live (docs/selection.md, "What a query
# pays"): for each protocol a fresh `somm serve` on the demo repository,
# then, from the first query after it is ready, N task queries per accuracy
# floor, one after another (classification/digits with no floor and with
# each model's measured accuracy as the floor, classification/imagenet with
# none), each over that protocol through build/bench/bench_cost_queries: one
# long-lived client for the whole run, REST or gRPC alike, connected before
# its first query. Every answer's somm_predicted_cost_usd (the charge predicted
# at selection) is set against its somm_cost_usd (the charge of the batch it
# ran in; somm_measured_cost_usd when max_cost capped it). Prints, per
# protocol and variant: count, median, p99 and max of reported / predicted,
# the first query's ratio and the largest of the first 16, and PASS when
# p99 <= the band.
#
# Usage: bench/cost_agreement.sh [--queries N] [--imagenet-queries N] [--protocols "rest grpc"]
#                                [--band 1.5] [--skip-build] [--keep DIR]
# SOMM_BIN=<binary> measures another build of somm (default build/somm).
set -euo pipefail
cd "$(dirname "$0")/.."
QUERIES=300
IMAGENET_QUERIES=""
PROTOCOLS="rest grpc"
BAND=1.5
BUILD=1
KEEP=""
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  echo "  --queries N      task queries per accuracy floor and protocol (default $QUERIES)"
  echo "  --imagenet-queries N  the same for classification/imagenet (default: --queries / 3)"
  echo "  --protocols P    which protocols, in turn, each on a fresh server (default \"$PROTOCOLS\")"
  echo "  --band B         p99 of reported / predicted must be at most B (default $BAND)"
  echo "  --skip-build     use build/somm as it is"
  echo "  --keep DIR       keep the answers (one JSON line each) and the servers' logs in DIR"
}
while (($#)); do
  case "$1" in
    --queries) QUERIES="$2"; shift 2 ;;
    --imagenet-queries) IMAGENET_QUERIES="$2"; shift 2 ;;
    --protocols) PROTOCOLS="$2"; shift 2 ;;
    --band) BAND="$2"; shift 2 ;;
    --skip-build) BUILD=0; shift ;;
    --keep) KEEP="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
SOMM_BIN="${SOMM_BIN:-build/somm}"
CLIENT=build/bench/bench_cost_queries
if ((BUILD)); then
  targets=(bench_cost_queries)
  [[ $SOMM_BIN == build/somm ]] && targets+=(somm)
  cmake --build build --target "${targets[@]}" >/dev/null
fi
die() { echo "$0: $*" >&2; exit 1; }
source bench/lib.sh
[[ -x $SOMM_BIN ]] || die "no $SOMM_BIN (build it, or drop --skip-build)"
[[ -x $CLIENT ]] || die "no $CLIENT (build it, or drop --skip-build)"
IMAGENET_QUERIES=${IMAGENET_QUERIES:-$(((QUERIES + 2) / 3))}
[[ -f models/demo/.stamp ]] || die "no demo repository in models/demo (scripts/setup makes it)"
OUT="${KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/somm-cost-agreement.XXXXXX")}"
mkdir -p "$OUT"
[[ -n $KEEP ]] && rm -f "$OUT"/*.jsonl
trap 'kill_children; [[ -n $KEEP ]] || rm -rf "$OUT"' EXIT

# The digits floors: none, then each model's accuracy from its model.yaml, so
# that each floor leaves a different cheapest model.
FLOORS=(none)
for m in digits-logistic digits-mlp digits-cnn; do
  FLOORS+=("$(sed -n 's/^accuracy: {value: \([0-9.]*\).*/\1/p' "models/demo/$m/model.yaml")")
done

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "queries: $QUERIES per digits floor (${FLOORS[*]}), $IMAGENET_QUERIES of imagenet (no floor); each over REST and gRPC"
for proto in $PROTOCOLS; do
  start_somm_serve "$proto" "$SOMM_BIN" "$OUT/serve-$proto" --model-repository models/demo \
    --log-level info
  # Task queries need the variants' profiles: wait until every model lists
  # its variants READY (a pipeline or a model without variants shows "-").
  ready=0
  for _ in $(seq 1500); do
    if "$SOMM_BIN" models --url "127.0.0.1:$SERVED_HTTP_PORT" 2>/dev/null |
      awk 'NR > 1 && $4 != "READY" && $4 != "-" {bad = 1} END {exit bad}'; then
      ready=1
      break
    fi
    alive_or_die "$SERVED_PID" "somm serve ($proto)" "$OUT/serve-$proto.stderr"
    sleep 0.2
  done
  ((ready)) || die "somm serve ($proto): variants not all READY after 300 s (somm models --url 127.0.0.1:$SERVED_HTTP_PORT)"
  port=$SERVED_HTTP_PORT protocol=http
  [[ $proto == grpc ]] && port=$SERVED_GRPC_PORT protocol=grpc
  steps=()
  for floor in "${FLOORS[@]}"; do
    param=""
    [[ $floor != none ]] && param=" min_accuracy=$floor"
    steps+=(--step "classification/digits models/demo/.examples/digit_3.json $QUERIES$param")
  done
  steps+=(--step "classification/imagenet models/demo/.examples/resnet_input.json $IMAGENET_QUERIES")
  "$CLIENT" --url "127.0.0.1:$port" -i "$protocol" "${steps[@]}" --out "$OUT/$proto-answers.jsonl"
  stop_pid "$SERVED_PID"
  # What each load took, warm-up included ("worker W: loaded LABEL xN in T ms").
  echo "$proto loads (ms): $(sed -n 's/.*: loaded \([^ ]*\) x[0-9]* in \([0-9]*\) ms.*/\1=\2/p' \
    "$OUT/serve-$proto.stderr" "$OUT/serve-$proto.stdout" | tr '\n' ' ')"
done
/usr/bin/python3 bench/cost_agreement.py report --band "$BAND" "$OUT"/*-answers.jsonl
