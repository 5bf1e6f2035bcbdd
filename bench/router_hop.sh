#!/usr/bin/env bash
# The cost of the router hop (issue #14): `somm serve` (router and worker in
# one process, direct calls) against a cluster of real processes on the same
# repository (redis-server, one `somm controller`, one `somm worker`, one
# `somm router`; the query goes router -> gRPC -> worker), on digits-mlp
# (tiny: the hop is most of the server time) and resnet18 (compute-heavy:
# the hop competes with the model for the cores), over REST and gRPC.
#
# Per (model, wire, target) it measures, with `somm bench`, closed loop:
#   latency     concurrency 1: p50 and p99
#   throughput  at saturation (digits-mlp 16 in flight, resnet18 16): queries/s
# resnet18's saturation is twice its max_batch_size (8), so that the next
# batch waits while one runs and both targets run full batches: at 8 in flight
# the queue drains after every batch and the figure is a closed loop's
# turnaround, not the server's capacity. It is counted over 3 windows of 5 s:
# answers come 8 at a time, 10 batches a second, and a window of 2 s counts
# them to within 4 queries/s (5%).
# and over each run the CPU seconds of every server process (/proc/PID/stat
# utime + stime) and of the load generator, divided by the queries the
# front process answered (its somm_inference_request_success_total delta,
# warm-up included) = CPU per query per process.
#
# Both targets run side by side all along, and every repeat measures them in
# turn (embedded first on even repeats, the cluster first on odd ones), so
# that a noisy shared machine loads both alike; the report takes the median
# over repeats. bench/router_hop_report.py writes OUT/router_hop.json and
# OUT/report.md: p50 and p99 added by the hop, the throughput ratio, CPU per
# query per process, and the targets (at most 100 us added at p50 on
# digits-mlp; at least 95% of embedded throughput on resnet18).
#
# Usage: bench/router_hop.sh [--quick] [--skip-build] [--repeats N]
#                            [--models "digits-mlp resnet18"] [--out DIR]
#   --quick       1 repeat, short windows (a smoke test; figures are rough), ~1 min
#   --repeats N   repeats per point (default 3); per repeat about 1 min for
#                 digits-mlp, 2 for resnet18
# Environment: SOMM_BUILD_DIR=<dir> (default build), SOMM_WORKER_FLAGS="<extra
# somm worker flags>" (e.g. "--inline-max-compute-us 0" for an A/B run),
# SOMM_ROUTER_FLAGS="<extra somm router flags>" (e.g. "--grpc-threads 1").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

COMMAND="bench/router_hop.sh${*:+ $*}"
[[ -n "${SOMM_BUILD_DIR:-}" ]] && COMMAND="SOMM_BUILD_DIR=$SOMM_BUILD_DIR $COMMAND"
[[ -n "${SOMM_WORKER_FLAGS:-}" ]] && COMMAND="SOMM_WORKER_FLAGS='$SOMM_WORKER_FLAGS' $COMMAND"
[[ -n "${SOMM_ROUTER_FLAGS:-}" ]] && COMMAND="SOMM_ROUTER_FLAGS='$SOMM_ROUTER_FLAGS' $COMMAND"
BUILD_DIR="${SOMM_BUILD_DIR:-build}"
PY=/usr/bin/python3
REPO=models/demo
QUICK=0
DO_BUILD=1
REPEATS=3
MODELS="digits-mlp resnet18"
OUT=""
while (($#)); do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --skip-build) DO_BUILD=0; shift ;;
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift 2 ;;
    --models) MODELS="${2:?--models needs model names}"; shift 2 ;;
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/router_hop.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "bench/router_hop.sh: $*" >&2; exit 1; }
heading() { printf '\n==> %s\n' "$*"; }
source "$ROOT/bench/lib.sh"

# ---- settings: warm-up s, window s, windows (fixed: --max-windows = 3, the minimum)
# TIMING_<model>: at concurrency 1; SAT_TIMING_<model>: at saturation.
if ((QUICK)); then
  REPEATS=1; TIMING_digits_mlp=(0.5 0.5); TIMING_resnet18=(0.5 1)
  SAT_TIMING_digits_mlp=(0.5 0.5); SAT_TIMING_resnet18=(0.5 1)
else
  TIMING_digits_mlp=(1 1.5); TIMING_resnet18=(1 2)
  SAT_TIMING_digits_mlp=(1 1.5); SAT_TIMING_resnet18=(2 5)
fi
declare -A SAT_C=([digits-mlp]=16 [resnet18]=16)
declare -A INPUT=([digits-mlp]="$REPO/.examples/digit_3.json" [resnet18]="$REPO/.examples/resnet_input.json")

# ---- binaries and the repository
if ((DO_BUILD)); then
  heading "build ($BUILD_DIR: somm)"
  cmake --build "$BUILD_DIR" --target somm
fi
SOMM="$BUILD_DIR/somm"
[[ -x "$SOMM" ]] || die "no $SOMM (build it, or set SOMM_BUILD_DIR)"
command -v redis-server >/dev/null || die "redis-server is not installed (scripts/setup installs it)"
for m in $MODELS; do
  [[ -n "${SAT_C[$m]:-}" ]] || die "no settings for model '$m' (digits-mlp, resnet18)"
  [[ -f "$REPO/$m/1/model.pt" ]] || die "no $REPO/$m (scripts/setup --skip-packages --skip-build)"
  # Both targets run without variant generation: without persisted profiles
  # the selector has nothing to decide with.
  compgen -G "$REPO/.somm/variants/$m/*/*/profile.json" >/dev/null ||
    die "model '$m' in $REPO has no variant profiles yet: run \`somm serve --model-repository $REPO\` until \`somm models\` shows its variants READY"
done

# Every process and every `somm bench` run the same binary: a copy, so that
# a rebuild during the run changes nothing.
BIN_DIR="$(mktemp -d -t somm-router-hop.XXXXXX)"
trap 'kill_children; rm -rf "$BIN_DIR"' EXIT
cp "$SOMM" "$BIN_DIR/somm"
SOMM="$BIN_DIR/somm"

OUT="${OUT:-bench/out/router-hop-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT/runs"
DATE_START="$(date -u '+%Y-%m-%d %H:%M UTC')"
GIT_START="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] && GIT_START="$GIT_START + uncommitted changes"
LOADAVG_START="$(cut -d' ' -f1-3 /proc/loadavg)"
START_S=$SECONDS

# ---- the two targets, started once, side by side.
# Static provisioning on both (--managed false): the configured instance of
# every model, loaded at start and never swapped, so the figures differ by
# the hop alone.
heading "somm serve $REPO"
start_somm_serve embedded "$SOMM" "$OUT/serve" --model-repository "$REPO" \
  --auto-variants false --managed false
SERVE_PID="$SERVED_PID"
declare -A PORT=([embedded-rest]="$SERVED_HTTP_PORT" [embedded-grpc]="$SERVED_GRPC_PORT")
declare -A METRICS=([embedded]="$SERVED_METRICS_PORT")
echo "$SERVED_BANNER (pid $SERVE_PID)"

heading "cluster: redis-server, controller, worker, router"
start_somm_cluster "$SOMM" "$REPO" "$OUT/cluster" 1 1 --managed false
PORT[cluster-rest]="${CLUSTER_ROUTER_HTTP[0]}"
PORT[cluster-grpc]="${CLUSTER_ROUTER_GRPC[0]}"
METRICS[cluster]="${CLUSTER_ROUTER_METRICS[0]}"
# name=pid of every process of a target, in report order.
declare -A PROCS=(
  [embedded]="serve=$SERVE_PID"
  [cluster]="router=${CLUSTER_ROUTER_PIDS[0]} worker=${CLUSTER_WORKER_PIDS[0]} controller=$CLUSTER_CONTROLLER_PID redis=$CLUSTER_REDIS_PID"
)
echo "router pid ${CLUSTER_ROUTER_PIDS[0]} (http ${PORT[cluster-rest]}, grpc ${PORT[cluster-grpc]}), worker pid ${CLUSTER_WORKER_PIDS[0]}"

for m in $MODELS; do
  for t in embedded cluster; do
    for _ in $(seq 600); do
      curl -sf "http://127.0.0.1:${PORT[$t-rest]}/v2/models/$m/ready" >/dev/null && break
      sleep 0.2
    done
    curl -sf "http://127.0.0.1:${PORT[$t-rest]}/v2/models/$m/ready" >/dev/null ||
      die "$t serves no ready '$m' after 120 s"
    curl -sf "http://127.0.0.1:${PORT[$t-rest]}/v2/models/$m/infer" -d @"${INPUT[$m]}" >/dev/null ||
      die "$t failed a first '$m' query"
  done
done

# answered PORT: the queries a front process answered so far (all models).
answered() {
  curl -sf "http://127.0.0.1:$1/metrics" |
    awk '/^somm_inference_request_success_total\{/ {s += $NF} END {printf "%d", s}'
}

# measure TARGET WIRE MODEL CONCURRENCY FILE: one `somm bench` run, and
# FILE.cpu.json: CPU seconds per process, of the load generator, the
# queries answered and the wall time.
measure() {
  local target="$1" wire="$2" model="$3" c="$4" file="$5"
  local proc name pid q0 q1 t0 t1 user sys cpus0=() cpus1=() binary=() proto=http
  local timing_var="TIMING_${model//-/_}"
  [[ "$c" != 1 ]] && timing_var="SAT_$timing_var"
  local -n timing="$timing_var"
  [[ "$wire" == rest ]] && binary=(--binary)
  [[ "$wire" == grpc ]] && proto=grpc
  for proc in ${PROCS[$target]}; do cpus0+=("$(cpu_s "${proc#*=}")"); done
  q0="$(answered "${METRICS[$target]}")"; t0="$EPOCHREALTIME"
  local cmd=("$SOMM" bench "$model" --url "127.0.0.1:${PORT[$target-$wire]}" -i "$proto"
             "${binary[@]}" --concurrency "$c" --warmup-s "${timing[0]}" --window-s "${timing[1]}"
             --max-windows 3 --input "${INPUT[$model]}" --label "$target-$wire" --json "$file.json")
  printf '%s\n' "${cmd[*]}" >>"$OUT/commands.txt"
  /usr/bin/time -o "$file.time" -f '%U %S' "${cmd[@]}" >"$file.log" 2>&1 ||
    { tail -n 20 "$file.log" >&2; die "failed: ${cmd[*]} (log: $file.log)"; }
  t1="$EPOCHREALTIME"; q1="$(answered "${METRICS[$target]}")"
  for proc in ${PROCS[$target]}; do cpus1+=("$(cpu_s "${proc#*=}")"); done
  read -r user sys <"$file.time"
  {
    printf '{"queries": %d, "wall_s": %.3f, "loadgen_cpu_s": %.2f, "cpu_s": {' \
      $((q1 - q0)) "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
      "$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')"
    local i=0 sep=""
    for proc in ${PROCS[$target]}; do
      name="${proc%%=*}"
      printf '%s"%s": %.2f' "$sep" "$name" "$(awk -v a="${cpus0[$i]}" -v b="${cpus1[$i]}" 'BEGIN {print b - a}')"
      sep=", "; i=$((i + 1))
    done
    printf '}}\n'
  } >"$file.cpu.json"
  for proc in ${PROCS[$target]}; do
    alive_or_die "${proc#*=}" "$target ${proc%%=*}" "$OUT/serve.stderr"
  done
}

# ---- the runs
heading "measuring: $REPEATS repeat(s) of $MODELS x rest, grpc x embedded, cluster x c=1, saturation"
for ((r = 0; r < REPEATS; ++r)); do
  order="embedded cluster"
  ((r % 2)) && order="cluster embedded"
  for m in $MODELS; do
    for wire in rest grpc; do
      for t in $order; do
        for c in 1 "${SAT_C[$m]}"; do
          file="$OUT/runs/$m-$wire-$t-c$c-r$r"
          measure "$t" "$wire" "$m" "$c" "$file"
          "$PY" - "$file.json" "$file.cpu.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))["points"][0]
cpu = json.load(open(sys.argv[2]))
print(f"  {sys.argv[1].rsplit('/', 1)[1][:-5]:40s} {p['throughput_qps']:8.1f} q/s  "
      f"p50 {p['latency_us']['p50']:7d} us  p99 {p['latency_us']['p99']:7d} us  "
      f"cpu {', '.join(f'{k} {v:.2f}' for k, v in cpu['cpu_s'].items())} s / {cpu['queries']} q")
EOF
        done
      done
    done
  done
done

# ---- the report
heading "report"
cat >"$OUT/meta.json" <<EOF
{"date": "$DATE_START", "git": "$GIT_START", "command": "$COMMAND",
 "cores": $(nproc), "loadavg_start": "$LOADAVG_START",
 "loadavg_end": "$(cut -d' ' -f1-3 /proc/loadavg)", "elapsed_s": $((SECONDS - START_S)),
 "repeats": $REPEATS, "models": "$MODELS",
 "sat_concurrency": {"digits-mlp": ${SAT_C[digits-mlp]}, "resnet18": ${SAT_C[resnet18]}},
 "settings": "closed loop; warm-up s / window s (3 windows) at c=1: digits-mlp ${TIMING_digits_mlp[*]}, resnet18 ${TIMING_resnet18[*]}; at saturation: digits-mlp ${SAT_TIMING_digits_mlp[*]}, resnet18 ${SAT_TIMING_resnet18[*]}; REST with the binary tensor extension; both targets --managed false, --auto-variants false (serve)"}
EOF
"$PY" bench/router_hop_report.py "$OUT"
echo "report: $OUT/report.md, $OUT/router_hop.json   ($((SECONDS - START_S)) s)"
