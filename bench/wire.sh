#!/usr/bin/env bash
# The wire, measured by clients that are not the limit (issue #45): somm
# against the limit of each wire, with load generators cheaper per request
# than the servers they drive, the client's and the server's CPU per request
# printed beside every figure.
#
# digits-mlp, on three wires, each at every --connections value:
#   REST JSON     wrk -t1 POSTing models/demo/.examples/digit_3.json; the limit:
#                 nginx answering somm's own answer bytes (bench/wire_limit.sh)
#   REST binary   wrk -t1 POSTing the same tensor with the binary tensor
#                 extension both ways (Inference-Header-Content-Length, then
#                 raw FP32; binary_data_output); the limit: a second nginx
#                 answering somm's binary answer, header included
#   gRPC          bench_grpc_load (bench/grpc_load.cc: one completion queue,
#                 one polling thread, the request serialised once); the limit:
#                 bench_grpc_wire_limit answering somm's ModelInfer bytes
# somm and the limits run side by side (an idle one costs nothing) and are
# measured in turn, somm then its limit, wire after wire, so a share is a
# ratio of two figures taken seconds apart.
#
# resnet18 at batch 8 against raw libtorch: per run, bench_raw_libtorch at
# batch 8 with the model's intra-op threads (the limit), then somm over REST
# JSON (the 1.6 MB body), REST binary and gRPC at --resnet-connections
# one-image queries (somm batches them up to 8); each row as a share of that
# run's raw figure. And what the JSON decode of that body costs the server,
# in µs per MB (bench_json_decode, fast path).
#
# Every measurement is taken --runs times (default 3); the tables give the
# medians, then every run. Client CPU per request: wrk's user+system time
# (bash `time`) over its run, bench_grpc_load's own getrusage over its
# window, divided by the requests answered; server CPU per request: the
# server process's (nginx: its worker's) /proc ticks over the same run.
#
# Usage: bench/wire.sh [--duration-s S] [--runs N] [--connections "16 32"]
#          [--resnet-connections C] [--resnet-duration-s S] [--warmup-s S]
#          [--only digits|resnet] [--out DIR]
# Environment: SOMM_BUILD_DIR=<dir> (default build: somm, bench_grpc_load,
# bench_grpc_wire_limit, bench_raw_libtorch, bench/bench_json_decode).
# Needs Debian's wrk and nginx-light. Writes DIR (default
# bench/out/wire-<UTC time>/): runs.tsv, report.md (also printed), logs.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "wire.sh: $*" >&2; exit 1; }
source bench/lib.sh
source bench/wire_limit.sh

duration=10 runs=3 connections="16 32" resnet_connections=16 resnet_duration="" warmup=2
only="" out="" command_line="bench/wire.sh${*:+ $*}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration-s) duration="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --resnet-connections) resnet_connections="$2"; shift 2 ;;
    --resnet-duration-s) resnet_duration="$2"; shift 2 ;;
    --warmup-s) warmup="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (--help)" ;;
  esac
done
[[ -z "$only" || "$only" == digits || "$only" == resnet ]] || die "--only digits or resnet"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer"
resnet_duration="${resnet_duration:-$duration}"
build="${SOMM_BUILD_DIR:-build}"
for tool in wrk curl; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
for bin in somm bench_grpc_load bench_grpc_wire_limit bench_raw_libtorch bench/bench_json_decode; do
  [[ -x "$build/$bin" ]] || die "no $build/$bin (cmake --build $build --target ${bin##*/})"
done
out="${out:-bench/out/wire-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
tsv="$out/runs.tsv"
printf 'model\twire\tconnections\trun\ttarget\tqps\tp50_us\tp99_us\trequests\terrors\tclient_cpu_us\tserver_cpu_us\n' >"$tsv"

# binary_body JSON OUT: the JSON body's tensors with the binary tensor
# extension (a JSON header whose inputs carry binary_data_size, then their
# raw little-endian bytes; every output asked binary); prints the header's length.
binary_body() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
body = json.load(open(sys.argv[1]))
formats = {"FP32": "f", "FP64": "d", "INT32": "i", "INT64": "q", "UINT8": "B"}
def flat(v):
    return [x for item in v for x in flat(item)] if isinstance(v, list) else [v]
raw = b""
for tensor in body["inputs"]:
    values = flat(tensor.pop("data"))
    data = struct.pack("<%d%s" % (len(values), formats[tensor["datatype"]]), *values)
    tensor.setdefault("parameters", {})["binary_data_size"] = len(data)
    raw += data
body.setdefault("parameters", {})["binary_data_output"] = True
head = json.dumps(body, separators=(",", ":")).encode()
open(sys.argv[2], "wb").write(head + raw)
print(len(head))
PY
}

# post_lua FILE BODY [HEADER_LENGTH]: a wrk script POSTing BODY (binary
# extension when HEADER_LENGTH is given) that prints, at the end,
# "RESULT <requests/s> <p50 us> <p99 us> <requests> <failed>".
post_lua() {
  local type=application/json extra=""
  if [[ -n "${3:-}" ]]; then
    type=application/octet-stream
    extra="wrk.headers[\"Inference-Header-Content-Length\"] = \"$3\""
  fi
  cat >"$1" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "$type"
$extra
local f = assert(io.open("$2", "rb"))
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %d %d %d %d\n", summary.requests / (summary.duration / 1e6),
                         latency:percentile(50), latency:percentile(99), summary.requests,
                         summary.errors.status + summary.errors.connect + summary.errors.read
                         + summary.errors.write + summary.errors.timeout))
end
LUA
}

# The wire limit's nginx for the binary answer: bench/wire_limit.sh's config,
# plus the answer's Inference-Header-Content-Length (DIR/binary_header).
eval "wire_limit_conf_json() $(declare -f wire_limit_conf | tail -n +2)"
wire_limit_conf() {
  wire_limit_conf_json "$@"
  if [[ -f "$1/binary_header" ]]; then
    sed -i "s/^\(      default_type .*\)$/\1\n      add_header Inference-Header-Content-Length $(cat "$1/binary_header") always;/" \
      "$1/nginx.conf"
  fi
}

# capture_binary BASE_URL PATH BODY HEADER_LENGTH DIR: somm's answer to the
# binary POST, saved as bench/wire_limit.sh saves its answers.
capture_binary() {
  local url="$1$2" path="$2" body="$3" hlen="$4" dir="$5" got code type header
  mkdir -p "$dir/answers"
  cp "$body" "$dir/request.json"  # what wire_limit_check sends; nginx ignores it
  got="$(curl -s -D "$dir/head" -o "$dir/answers/1.body" -w '%{http_code} %{content_type}' \
    -H 'Content-Type: application/octet-stream' -H "Inference-Header-Content-Length: $hlen" \
    --data-binary "@$body" "$url")" || die "cannot reach somm at $url"
  read -r code type <<<"$got"
  [[ "$code" == 200 ]] || die "somm answered the binary POST with HTTP $code"
  header="$(tr -d '\r' <"$dir/head" | awk -F': ' 'tolower($1) == "inference-header-content-length" {print $2}')"
  [[ -n "$header" ]] || die "somm's binary answer has no Inference-Header-Content-Length"
  echo "$header" >"$dir/binary_header"
  printf 'POST\t%s\t%s\t1\n' "$path" "$type" >"$dir/answers.tsv"
}

# check_binary_header DIR: nginx's binary answer carries somm's header value.
check_binary_header() {
  local got
  got="$(curl -s -D - -o /dev/null -X POST --data-binary @"$1/request.json" \
    "http://127.0.0.1:$WIRE_PORT$(cut -f2 "$1/answers.tsv")" | tr -d '\r' |
    awk -F': ' 'tolower($1) == "inference-header-content-length" {print $2}')"
  [[ "$got" == "$(cat "$1/binary_header")" ]] ||
    die "nginx's Inference-Header-Content-Length is '$got', somm's $(cat "$1/binary_header")"
}

# measure_wrk MODEL WIRE C RUN TARGET URL LUA SERVER_PID DURATION: one wrk
# run, one line of runs.tsv.
measure_wrk() {
  local model="$1" wire="$2" c="$3" run="$4" target="$5" url="$6" lua="$7" pid="$8" d="$9"
  local s0 s1 log="$out/wrk-$model-$wire-c$c-$run-$target" line q p50 p99 n e user sys
  s0="$(cpu_s "$pid")"
  TIMEFORMAT='%U %S'
  { time wrk -t1 --timeout 60s -c"$c" -d"${d}s" -s "$lua" "$url" >"$log.out" 2>&1; } 2>"$log.time"
  s1="$(cpu_s "$pid")"
  line="$(grep '^RESULT' "$log.out")" || die "wrk printed no result ($log.out)"
  read -r _ q p50 p99 n e <<<"$line"
  read -r user sys <"$log.time"
  ((n > 0 && e == 0)) || die "$model $wire c=$c run $run $target: $n answered, $e failed ($log.out)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$wire" "$c" "$run" "$target" \
    "$q" "$p50" "$p99" "$n" "$e" \
    "$(awk -v u="$user" -v s="$sys" -v n="$n" 'BEGIN {printf "%.2f", (u + s) * 1e6 / n}')" \
    "$(awk -v a="$s0" -v b="$s1" -v n="$n" 'BEGIN {printf "%.2f", (b - a) * 1e6 / n}')" >>"$tsv"
  echo "  $model $wire c=$c run $run $target: $q q/s, p99 $p99 µs, $e errors"
}

# measure_grpc MODEL C RUN TARGET PORT BODY SERVER_PID DURATION: one
# bench_grpc_load run, one line of runs.tsv.
measure_grpc() {
  local model="$1" c="$2" run="$3" target="$4" port="$5" body="$6" pid="$7" d="$8"
  local log="$out/grpc-$model-c$c-$run-$target.json"
  "$build/bench_grpc_load" --target "127.0.0.1:$port" --model "$model" --input "$body" \
    --concurrency "$c" --warmup-s 1 --duration-s "$d" --server-pid "$pid" >"$log" ||
    die "bench_grpc_load failed against $target ($log)"
  /usr/bin/python3 - "$log" "$model" "$c" "$run" "$target" >>"$tsv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("\t".join([sys.argv[2], "grpc", sys.argv[3], sys.argv[4], sys.argv[5], "%.1f" % r["qps"],
                 "%d" % r["p50_us"], "%d" % r["p99_us"], str(r["requests"]), str(r["errors"]),
                 "%.2f" % r["client_cpu_us_per_request"],
                 "-" if r["server_cpu_us_per_request"] is None else "%.2f" % r["server_cpu_us_per_request"]]))
PY
  tail -n 1 "$tsv" | awk -F'\t' '{printf "  %s grpc c=%s run %s %s: %s q/s, p99 %s µs, %s errors\n", $1, $3, $4, $5, $6, $8, $10}'
}

# A repository of one demo model (its model.yaml copied, its version linked).
one_model_repo() {
  mkdir -p "$1/$2"
  cp "models/demo/$2/model.yaml" "$1/$2/"
  ln -sfn "$PWD/models/demo/$2/1" "$1/$2/1"
}

echo "$command_line: $build/somm (checkout $(git rev-parse --short HEAD)), $(date -u '+%Y-%m-%d %H:%M UTC')," \
  "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/header"
echo "out: $out"

if [[ "$only" != resnet ]]; then
  model=digits-mlp json=models/demo/.examples/digit_3.json
  [[ -f "$json" ]] || die "no $json (scripts/setup makes the demo repository)"
  one_model_repo "$out/repo-digits" "$model"
  hlen="$(binary_body "$json" "$out/digits.bin")"
  post_lua "$out/digits-json.lua" "$PWD/$json"
  post_lua "$out/digits-binary.lua" "$out/digits.bin" "$hlen"
  start_somm_serve digits "$build/somm" "$out/somm-digits" --model-repository "$out/repo-digits" \
    --auto-variants false
  somm_pid="$SERVED_PID" url="http://127.0.0.1:$SERVED_HTTP_PORT/v2/models/$model/infer"
  curl -sf -d @"$json" "$url" >/dev/null || die "somm did not answer the first query"
  # The limits: nginx (JSON), nginx (binary), the gRPC cache.
  wire_limit_capture "http://127.0.0.1:$SERVED_HTTP_PORT" "$model" "$json" "$out/nginx-json"
  wire_limit_start "$out/nginx-json"
  wire_limit_check "$out/nginx-json"
  json_port="$WIRE_PORT" json_worker="$WIRE_WORKER_PID"
  capture_binary "http://127.0.0.1:$SERVED_HTTP_PORT" "/v2/models/$model/infer" "$out/digits.bin" \
    "$hlen" "$out/nginx-binary"
  wire_limit_start "$out/nginx-binary"
  wire_limit_check "$out/nginx-binary"
  check_binary_header "$out/nginx-binary"
  binary_port="$WIRE_PORT" binary_worker="$WIRE_WORKER_PID"
  "$build/bench_grpc_wire_limit" --upstream "127.0.0.1:$SERVED_GRPC_PORT" --port 0 \
    >"$out/grpc-limit.stdout" 2>"$out/grpc-limit.stderr" &
  glimit_pid=$!
  PIDS+=("$glimit_pid")
  wait_banner bench_grpc_wire_limit "$glimit_pid" "$out/grpc-limit.stdout" 'listening on ([0-9]+)'
  glimit_port="${BASH_REMATCH[1]}"
  echo "digits-mlp: somm http=$SERVED_HTTP_PORT grpc=$SERVED_GRPC_PORT; nginx json=$json_port" \
    "binary=$binary_port; grpc limit=$glimit_port; answers $(wire_limit_infer_bytes "$out/nginx-json")" \
    "bytes (JSON), $(wc -c <"$out/nginx-binary/answers/1.body") (binary)"
  # Warm-up: every target once (the gRPC limit's first call fills its cache).
  for c in $connections; do
    wrk -t1 --timeout 60s -c"$c" -d"${warmup}s" -s "$out/digits-json.lua" "$url" >/dev/null
    wrk -t1 --timeout 60s -c"$c" -d"${warmup}s" -s "$out/digits-binary.lua" "$url" >/dev/null
    wrk -t1 --timeout 60s -c"$c" -d"${warmup}s" -s "$out/digits-json.lua" \
      "http://127.0.0.1:$json_port/v2/models/$model/infer" >/dev/null
    wrk -t1 --timeout 60s -c"$c" -d"${warmup}s" -s "$out/digits-binary.lua" \
      "http://127.0.0.1:$binary_port/v2/models/$model/infer" >/dev/null
    for port in "$SERVED_GRPC_PORT" "$glimit_port"; do
      "$build/bench_grpc_load" --target "127.0.0.1:$port" --model "$model" --input "$json" \
        --concurrency "$c" --warmup-s 0 --duration-s "$warmup" >/dev/null ||
        die "bench_grpc_load's warm-up against port $port failed"
    done
  done
  for run in $(seq "$runs"); do
    for c in $connections; do
      measure_wrk "$model" rest-json "$c" "$run" somm "$url" "$out/digits-json.lua" "$somm_pid" "$duration"
      measure_wrk "$model" rest-json "$c" "$run" limit "http://127.0.0.1:$json_port/v2/models/$model/infer" \
        "$out/digits-json.lua" "$json_worker" "$duration"
      measure_wrk "$model" rest-binary "$c" "$run" somm "$url" "$out/digits-binary.lua" "$somm_pid" "$duration"
      measure_wrk "$model" rest-binary "$c" "$run" limit \
        "http://127.0.0.1:$binary_port/v2/models/$model/infer" "$out/digits-binary.lua" "$binary_worker" \
        "$duration"
      measure_grpc "$model" "$c" "$run" somm "$SERVED_GRPC_PORT" "$json" "$somm_pid" "$duration"
      measure_grpc "$model" "$c" "$run" limit "$glimit_port" "$json" "$glimit_pid" "$duration"
    done
  done
  WIRE_PORT="$json_port" wire_limit_check "$out/nginx-json"  # the same bytes after the load
  WIRE_PORT="$binary_port" wire_limit_check "$out/nginx-binary"
  kill_children
fi

if [[ "$only" != digits ]]; then
  model=resnet18 json=models/demo/.examples/resnet_input.json
  [[ -f "$json" ]] || die "no $json (scripts/setup makes the demo repository)"
  one_model_repo "$out/repo-resnet" "$model"
  threads="$(awk '/^intra_op_threads:/ {print $2}' "models/demo/$model/model.yaml")"
  max_batch="$(awk '/^max_batch_size:/ {print $2}' "models/demo/$model/model.yaml")"
  hlen="$(binary_body "$json" "$out/resnet.bin")"
  post_lua "$out/resnet-json.lua" "$PWD/$json"
  post_lua "$out/resnet-binary.lua" "$out/resnet.bin" "$hlen"
  "$build/bench/bench_json_decode" "$json" | tee "$out/json_decode.md"
  start_somm_serve resnet "$build/somm" "$out/somm-resnet" --model-repository "$out/repo-resnet" \
    --auto-variants false
  url="http://127.0.0.1:$SERVED_HTTP_PORT/v2/models/$model/infer"
  curl -sf -d @"$json" "$url" >/dev/null || die "somm did not answer the first resnet18 query"
  c="$resnet_connections"
  wrk -t1 --timeout 60s -c"$c" -d"${warmup}s" -s "$out/resnet-json.lua" "$url" >/dev/null
  for run in $(seq "$runs"); do
    "$build/bench_raw_libtorch" --model "models/demo/$model/1/model.pt" --name "$model" \
      --shape 3,224,224 --batch-size "$max_batch" --threads "$threads" --warmup-s 2 \
      --window-s "$(awk -v d="$resnet_duration" 'BEGIN {print (d / 3 < 2) ? 2 : d / 3}')" \
      --max-windows 3 --label "raw-libtorch-b$max_batch" --json "$out/raw-$run.json" \
      >"$out/raw-$run.log" 2>&1 || die "bench_raw_libtorch failed ($out/raw-$run.log)"
    /usr/bin/python3 - "$out/raw-$run.json" "$model" "$run" "$max_batch" >>"$tsv" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["points"][0]
print("\t".join([sys.argv[2], "raw", "1", sys.argv[3], "raw-libtorch-b" + sys.argv[4],
                 "%.2f" % p["throughput_sps"], "%d" % p["latency_us"]["p50"],
                 "%d" % p["latency_us"]["p99"], "-", "0", "-", "-"]))
PY
    echo "  $model raw run $run: $(cut -f6 <(tail -n 1 "$tsv")) samples/s"
    measure_wrk "$model" rest-json "$c" "$run" somm "$url" "$out/resnet-json.lua" "$SERVED_PID" \
      "$resnet_duration"
    measure_wrk "$model" rest-binary "$c" "$run" somm "$url" "$out/resnet-binary.lua" "$SERVED_PID" \
      "$resnet_duration"
    measure_grpc "$model" "$c" "$run" somm "$SERVED_GRPC_PORT" "$json" "$SERVED_PID" "$resnet_duration"
  done
  kill_children
fi

echo "wire.sh: finished $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" \
  >"$out/finished"
/usr/bin/python3 bench/wire_report.py "$out" | tee "$out/report.md"
