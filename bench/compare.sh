#!/usr/bin/env bash
# Side-by-side performance of somm against raw libtorch and a plain FastAPI
# server, on digits-mlp (tiny) and resnet18 (compute-heavy), in one go.
#
# For each model it measures, closed loop, one sample per query:
#   raw-libtorch-b1, raw-libtorch-bMAX   bench_raw_libtorch: libtorch in process
#                                        on the same TorchScript file with the
#                                        model's intra_op_threads, at batch 1
#                                        and at the model's max batch (the limit)
#   somm-rest, somm-rest-binary,         somm bench -> somm serve: REST with
#   somm-grpc                            JSON tensors, REST with the binary
#                                        tensor data extension (`--binary`,
#                                        what perf_analyzer sends by default),
#                                        gRPC
#   fastapi-peer                         somm bench -> bench/fastapi_peer.py
#                                        (FastAPI + uvicorn + the same
#                                        TorchScript file, JSON; the
#                                        naive-Python baseline)
#   wire-limit (digits-mlp only)         somm bench -i http -> nginx (one
#                                        worker, bench/wire_limit.sh) answering
#                                        somm's own response bytes to the same
#                                        request: what the wire and the load
#                                        generator allow when the server does
#                                        next to nothing
#   grpc-wire-limit (digits-mlp only)    somm bench -i grpc ->
#                                        bench_grpc_wire_limit (a generic gRPC
#                                        server, one completion-queue thread,
#                                        bench/grpc_wire_limit.cc) answering
#                                        somm's own response bytes: the same
#                                        for the gRPC wire
# over a concurrency sweep (digits-mlp: 1 2 4 ... 64; resnet18: 1 2 4 8 16; raw
# libtorch before and after the servers, the better run counting), and
# writes bench/out/<timestamp>/ (every JSON, logs, /metrics snapshots, the
# report.md from bench/report.py and one SVG plot per model, also copied to
# docs/performance-<model>.svg; the figures in docs/performance.md are
# replaced with this run's). It starts somm once and the peer once per
# model, on free ports, and kills them on exit. About 13 minutes.
#
# Usage: bench/compare.sh [--quick] [--skip-build] [--no-docs] [-j N] [--out DIR]
#   --quick       short windows (a smoke test of the script; figures are rough)
#   --skip-build  use the binaries as they are
#   --no-docs     leave docs/ alone (plots and docs/performance.md figures)
# Environment: SOMM_BUILD_DIR=<dir> (default build), SOMM_PEER=<path to another
# peer server with the same command line> (default bench/fastapi_peer.py),
# SOMM_NGINX=<nginx binary> (default: nginx on PATH; Debian's nginx-light).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

COMMAND="bench/compare.sh${*:+ $*}"
for var in SOMM_BUILD_DIR SOMM_PEER $(compgen -e | grep -E '^(OMP|MKL|GOMP|KMP)_' || true); do
  [[ -n "${!var:-}" ]] && COMMAND="$var=${!var} $COMMAND"
done
BUILD_DIR="${SOMM_BUILD_DIR:-build}"
PEER="${SOMM_PEER:-$ROOT/bench/fastapi_peer.py}"
PY=/usr/bin/python3
REPO=models/demo
JOBS=2
QUICK=0
DO_BUILD=1
DO_DOCS=1
OUT=""
while (($#)); do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --skip-build) DO_BUILD=0; shift ;;
    --no-docs) DO_DOCS=0; shift ;;
    -j) JOBS="${2:?-j needs a number}"; shift 2 ;;
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "bench/compare.sh: $*" >&2; exit 1; }
heading() { printf '\n==> %s\n' "$*"; }

# ---- measurement settings: warm-up s, window s, max windows (min is 3)
if ((QUICK)); then
  DIGITS_TIMING=(0.5 0.5 3); RESNET_TIMING=(1 1 3); RAW_RESNET_TIMING=(1 2 3)
else
  DIGITS_TIMING=(1 2 5); RESNET_TIMING=(2 3 4); RAW_RESNET_TIMING=(2 5 4)
fi
STABILITY_PCT=10

# ---- children: every process started here is killed on exit (PIDS,
# stop_pid, alive_or_die, start_somm_serve)
source "$ROOT/bench/lib.sh"
source "$ROOT/bench/wire_limit.sh"
# The model whose REST JSON path is compared with the wire limit.
WIRE_LIMIT_MODEL=digits-mlp

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- 1. binaries and the demo repository
if [[ ! -f "$REPO/digits-mlp/1/model.pt" || ! -f "$REPO/resnet18/1/model.pt" ]]; then
  heading "demo model repository (scripts/setup --skip-packages --skip-build)"
  scripts/setup --skip-packages --skip-build
fi
if ((DO_BUILD)); then
  heading "build ($BUILD_DIR: somm, bench_raw_libtorch)"
  if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja
  fi
  cmake --build "$BUILD_DIR" --target somm bench_raw_libtorch bench_grpc_wire_limit -j "$JOBS"
fi
SOMM="$BUILD_DIR/somm"
RAW="$BUILD_DIR/bench_raw_libtorch"
GRPC_WIRE="$BUILD_DIR/bench_grpc_wire_limit"
[[ -x "$SOMM" ]] || die "no $SOMM (build it, or set SOMM_BUILD_DIR)"
[[ -x "$RAW" ]] || die "no $RAW (build target bench_raw_libtorch)"
[[ -x "$GRPC_WIRE" ]] || die "no $GRPC_WIRE (build target bench_grpc_wire_limit)"
"$SOMM" --help 2>/dev/null | grep -qE '^ +bench ' ||
  die "$SOMM has no 'bench' subcommand (an older build? rebuild it)"
[[ -f "$PEER" ]] || die "no FastAPI peer at $PEER (set SOMM_PEER)"
[[ -x "$WIRE_NGINX" ]] || die "no nginx for the wire limit (install Debian's nginx-light, or set SOMM_NGINX)"

OUT="${OUT:-bench/out/$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
: >"$OUT/commands.txt"
LOADAVG_START="$(cut -d' ' -f1-3 /proc/loadavg)"
DATE_START="$(date -u '+%Y-%m-%d %H:%M UTC')"
GIT_START="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  GIT_START="$GIT_START + uncommitted changes"
fi
START_S=$SECONDS

# run LOG CMD...: records the command, runs it with its output in LOG, dies loudly on failure.
run() {
  local log="$1"; shift
  printf '%s\n' "$*" >>"$OUT/commands.txt"
  if ! "$@" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "failed: $* (log: $log)"
  fi
}

# CPU seconds (user + system, all threads) a process has used so far.
cpu_s() {
  sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($12 + $13) / hz}'
}

# CPU seconds the whole machine has been busy so far (all cores, /proc/stat).
machine_busy_s() {
  awk -v hz="$(getconf CLK_TCK)" '/^cpu / {printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / hz}' /proc/stat
}

# load SERVER_PID|- FILE CMD...: runs one measuring command like `run`, and
# writes FILE.cpu.json: the CPU seconds of the server (none for -), of the
# measuring process, and of everything else on the machine over the run, and
# its wall time. The report turns them into cores busy, CPU per query, and a
# flag on points measured while other work loaded the (shared) machine.
load() {
  local pid="$1" file="$2"; shift 2
  local cpu0=0 cpu1=0 busy0 busy1 t0 t1 user sys
  [[ "$pid" == - ]] || cpu0="$(cpu_s "$pid")"
  busy0="$(machine_busy_s)"; t0="$EPOCHREALTIME"
  run "$file.log" /usr/bin/time -o "$file.time" -f '%U %S' "$@"
  busy1="$(machine_busy_s)"; t1="$EPOCHREALTIME"
  [[ "$pid" == - ]] || cpu1="$(cpu_s "$pid")"
  read -r user sys <"$file.time"
  awk -v c0="$cpu0" -v c1="$cpu1" -v u="$user" -v s="$sys" -v t0="$t0" -v t1="$t1" \
      -v b0="$busy0" -v b1="$busy1" -v has_server="$([[ "$pid" == - ]] && echo 0 || echo 1)" 'BEGIN {
    server = has_server ? sprintf("%.2f", c1 - c0) : "null"
    other = (b1 - b0) - (c1 - c0) - (u + s); if (other < 0) other = 0
    printf "{\"server_cpu_s\": %s, \"loadgen_cpu_s\": %.2f, \"other_cpu_s\": %.2f, \"wall_s\": %.3f}\n",
           server, u + s, other, t1 - t0
  }' >"$file.cpu.json"
}

# model_field MODEL EXPR: a value from the model's model.yaml (python expression over `c`).
model_field() {
  "$PY" -c "import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); print($2)" \
    "$REPO/$1/model.yaml"
}

# wire_limit_sweep MODEL INPUT "CONCURRENCIES" WARMUP WINDOW MAXWIN: the
# `wire-limit` target. somm's answers to the questions `somm bench` asks are
# saved while somm runs, nginx serves them (checked byte for byte), and the
# same load generator sweeps it as it swept somm-rest. Server CPU is nginx's
# worker's.
wire_limit_sweep() {
  local model="$1" input="$2" concs="$3" warm="$4" win="$5" maxw="$6"
  local dir="$OUT/$model" wdir="$OUT/$model/wire-limit.nginx" c file
  wire_limit_capture "http://127.0.0.1:$HTTP_PORT" "$model" "$input" "$wdir"
  wire_limit_start "$wdir"
  wire_limit_check "$wdir"
  echo "wire limit: nginx on port $WIRE_PORT (worker pid $WIRE_WORKER_PID) answers somm's" \
    "$(wire_limit_infer_bytes "$wdir")-byte" \
    "response to POST /v2/models/$model/infer, byte for byte"
  printf '%s\n' "nginx -p $wdir -c $wdir/nginx.conf -e $wdir/error.log" >>"$OUT/commands.txt"
  for c in $concs; do
    file="$dir/wire-limit-c$c"
    load "$WIRE_WORKER_PID" "$file" "$SOMM" bench "$model" --url "127.0.0.1:$WIRE_PORT" -i http \
      --concurrency "$c" --warmup-s "$warm" --window-s "$win" --max-windows "$maxw" \
      --stability-pct "$STABILITY_PCT" --input "$input" --label wire-limit --json "$file.json"
    alive_or_die "$WIRE_WORKER_PID" "nginx (wire limit)" "$wdir/error.log"
    "$PY" bench/report.py --brief "$file.json"
  done
  wire_limit_check "$wdir"  # still the same bytes after the load
  stop_pid "$WIRE_PID"
}

# grpc_wire_limit_sweep MODEL INPUT "CONCURRENCIES" WARMUP WINDOW MAXWIN: the
# `grpc-wire-limit` target. bench_grpc_wire_limit forwards the first call of
# each method to somm's gRPC port and answers every later one with somm's
# bytes; a short warm-up run fills it before the sweep, and the same load
# generator then sweeps it as it swept somm-grpc. Server CPU is its own.
grpc_wire_limit_sweep() {
  local model="$1" input="$2" concs="$3" warm="$4" win="$5" maxw="$6"
  local dir="$OUT/$model" log="$OUT/$model/grpc-wire-limit.server.log" port pid c file
  port="$(free_port)"
  printf '%s\n' "$GRPC_WIRE --upstream 127.0.0.1:$GRPC_PORT --port $port" >>"$OUT/commands.txt"
  "$GRPC_WIRE" --upstream "127.0.0.1:$GRPC_PORT" --port "$port" >"$log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 100); do  # 10 s
    grep -q '^listening on' "$log" 2>/dev/null && break
    alive_or_die "$pid" "bench_grpc_wire_limit" "$log"
    sleep 0.1
  done
  grep -q '^listening on' "$log" || die "bench_grpc_wire_limit did not start (log: $log)"
  run "$dir/grpc-wire-limit-fill.log" "$SOMM" bench "$model" --url "127.0.0.1:$port" -i grpc \
    --concurrency 1 --warmup-s 0.2 --window-s 0.2 --max-windows 1 --input "$input"
  echo "gRPC wire limit: bench_grpc_wire_limit on port $port (pid $pid) answers somm's bytes"
  for c in $concs; do
    file="$dir/grpc-wire-limit-c$c"
    load "$pid" "$file" "$SOMM" bench "$model" --url "127.0.0.1:$port" -i grpc \
      --concurrency "$c" --warmup-s "$warm" --window-s "$win" --max-windows "$maxw" \
      --stability-pct "$STABILITY_PCT" --input "$input" --label grpc-wire-limit --json "$file.json"
    alive_or_die "$pid" "bench_grpc_wire_limit" "$log"
    "$PY" bench/report.py --brief "$file.json"
  done
  stop_pid "$pid"
  # What it answered, per method (printed as it stops).
  sed -n '/calls answered/p' "$log"
}

# ---- 2. somm, once, on free ports
heading "somm serve $REPO"
# --auto-variants false: variant generation would profile every demo model
# in the background and measure itself into these figures.
# --managed false: this compares the serving path on the configured instance
# (the same file and threads as raw libtorch); the autoscaler would swap
# variants and replicas under the sweep, and unload the models waiting their
# turn.
start_somm_serve somm "$SOMM" "$OUT/somm" --model-repository "$REPO" --auto-variants false \
  --managed false
SOMM_PID="$SERVED_PID"; BANNER="$SERVED_BANNER"
HTTP_PORT="$SERVED_HTTP_PORT"; GRPC_PORT="$SERVED_GRPC_PORT"; METRICS_PORT="$SERVED_METRICS_PORT"
for model in digits-mlp resnet18; do
  curl -sf "http://127.0.0.1:$HTTP_PORT/v2/models/$model/ready" >/dev/null ||
    die "somm serves no ready '$model' (see $SOMM models --url 127.0.0.1:$HTTP_PORT)"
done
echo "$BANNER (pid $SOMM_PID)"

# ---- 3. per model: raw libtorch, somm REST, somm gRPC, the peer
# bench_model MODEL INPUT "CONCURRENCIES" WARMUP WINDOW MAXWIN RAW_WARMUP RAW_WINDOW RAW_MAXWIN
bench_model() {
  local model="$1" input="$2" concs="$3" warm="$4" win="$5" maxw="$6"
  local rwarm="$7" rwin="$8" rmaxw="$9"
  local dir="$OUT/$model" threads max_batch shape file c
  mkdir -p "$dir"
  threads="$(model_field "$model" "c.get('intra_op_threads', 1)")"
  max_batch="$(model_field "$model" "c['max_batch_size']")"
  shape="$(model_field "$model" "','.join(str(d) for d in c['inputs'][0]['shape'])")"
  heading "$model: intra_op_threads $threads, max batch $max_batch, input shape [$shape]"

  # The limit is measured before and after the servers: other work on a
  # shared machine comes and goes, and the report takes the better of the two.
  raw_limit() {
    local b
    for b in 1 "$max_batch"; do
      file="$dir/raw-libtorch-b$b-$1"
      load - "$file" "$RAW" --model "$REPO/$model/1/model.pt" --name "$model" --shape "$shape" \
        --batch-size "$b" --threads "$threads" --concurrency 1 --warmup-s "$rwarm" \
        --window-s "$rwin" --max-windows "$rmaxw" --stability-pct "$STABILITY_PCT" \
        --label "raw-libtorch-b$b" --json "$file.json"
      "$PY" bench/report.py --brief "$file.json"
    done
  }
  raw_limit before

  local proto label port binary
  for label in somm-rest somm-rest-binary somm-grpc; do
    proto=http; port="$HTTP_PORT"; binary=()
    [[ "$label" == somm-rest-binary ]] && binary=(--binary)
    [[ "$label" == somm-grpc ]] && { proto=grpc; port="$GRPC_PORT"; }
    for c in $concs; do
      file="$dir/$label-c$c"
      curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$file.metrics.before" || die "no /metrics"
      load "$SOMM_PID" "$file" "$SOMM" bench "$model" --url "127.0.0.1:$port" -i "$proto" \
        "${binary[@]}" \
        --concurrency "$c" --warmup-s "$warm" --window-s "$win" --max-windows "$maxw" \
        --stability-pct "$STABILITY_PCT" --input "$input" --label "$label" --json "$file.json"
      curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$file.metrics.after" || die "no /metrics"
      alive_or_die "$SOMM_PID" "somm serve" "$OUT/somm.stderr"
      "$PY" bench/report.py --brief "$file.json"
    done
  done

  if [[ "$model" == "$WIRE_LIMIT_MODEL" ]]; then
    wire_limit_sweep "$model" "$input" "$concs" "$warm" "$win" "$maxw"
    grpc_wire_limit_sweep "$model" "$input" "$concs" "$warm" "$win" "$maxw"
  fi

  local peer_port peer_pid peer_log="$dir/fastapi-peer.server.log"
  peer_port="$(free_port)"
  "$PY" "$PEER" --model "$REPO/$model/1/model.pt" --name "$model" --port "$peer_port" \
    --threads "$threads" >"$peer_log" 2>&1 &
  peer_pid=$!
  PIDS+=("$peer_pid")
  for _ in $(seq 600); do  # 60 s
    curl -sf "http://127.0.0.1:$peer_port/v2/health/ready" >/dev/null 2>&1 && break
    alive_or_die "$peer_pid" "FastAPI peer" "$peer_log"
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$peer_port/v2/health/ready" >/dev/null ||
    die "FastAPI peer not ready on port $peer_port in 60 s (log: $peer_log)"
  echo "FastAPI peer for $model on port $peer_port (pid $peer_pid, --threads $threads)"
  for c in $concs; do
    file="$dir/fastapi-peer-c$c"
    load "$peer_pid" "$file" "$SOMM" bench "$model" --url "127.0.0.1:$peer_port" -i http \
      --concurrency "$c" --warmup-s "$warm" --window-s "$win" --max-windows "$maxw" \
      --stability-pct "$STABILITY_PCT" --input "$input" --label fastapi-peer --json "$file.json"
    alive_or_die "$peer_pid" "FastAPI peer" "$peer_log"
    "$PY" bench/report.py --brief "$file.json"
  done
  stop_pid "$peer_pid"
  raw_limit after
}

bench_model digits-mlp "$REPO/.examples/digit_3.json" "1 2 4 8 16 32 64" \
  "${DIGITS_TIMING[@]}" "${DIGITS_TIMING[@]}"
bench_model resnet18 "$REPO/.examples/resnet_input.json" "1 2 4 8 16" \
  "${RESNET_TIMING[@]}" "${RAW_RESNET_TIMING[@]}"

stop_pid "$SOMM_PID"

# ---- 4. the report
heading "report"
COMMAND="$COMMAND" DATE_START="$DATE_START" GIT_START="$GIT_START" LOADAVG_START="$LOADAVG_START" ELAPSED_S=$((SECONDS - START_S)) \
SETTINGS="closed loop, one sample per server query; warm-up s / window s / max windows: \
digits-mlp ${DIGITS_TIMING[*]}, resnet18 ${RESNET_TIMING[*]} (raw libtorch ${RAW_RESNET_TIMING[*]}); \
a point is stable when its last 3 windows agree within $STABILITY_PCT% on throughput and p99; \
REST bodies are JSON (somm-rest, the peer) or binary tensors (somm-rest-binary)" \
  "$PY" - "$OUT/meta.json" <<'EOF'
import json, os, platform, sys
env = os.environ
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "?")
mem = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal"))) // 2**20
json.dump({
    "date": env["DATE_START"],
    "command": env["COMMAND"],
    "git": env["GIT_START"],
    "cores": os.cpu_count(),
    "machine": f"{os.cpu_count()} cores ({cpu}), {mem} GiB, {platform.system()} "
               f"{platform.release()}; load generator, servers and peer share these cores",
    "loadavg_start": env["LOADAVG_START"],
    "loadavg_end": " ".join(open("/proc/loadavg").read().split()[:3]),
    "elapsed_s": int(env["ELAPSED_S"]),
    "settings": env["SETTINGS"],
    # Threading knobs change libtorch's behaviour; a report names the ones set.
    "env": {k: v for k, v in env.items() if k.startswith(("OMP_", "MKL_", "GOMP_", "KMP_"))},
}, open(sys.argv[1], "w"), indent=2)
EOF
DOCS_ARGS=()
if ((DO_DOCS)); then
  DOCS_ARGS=(--docs-dir docs)
  [[ -f docs/performance.md ]] && DOCS_ARGS+=(--update-doc docs/performance.md)
fi
"$PY" bench/report.py "$OUT" "${DOCS_ARGS[@]}"
echo
echo "report:  $OUT/report.md (plots: $OUT/performance-*.svg$( ((DO_DOCS)) && echo '; copied to docs/, figures in docs/performance.md updated'))"
echo "command: $COMMAND   ($((SECONDS - START_S)) s, load average before $LOADAVG_START)"
