#!/usr/bin/env bash
# One client at a time against two builds of `somm serve`, at the point
# where compare.sh's A/B disagreed with itself: digits-mlp at concurrency 1,
# over gRPC and REST JSON. Fresh servers in ABBA order (--starts of each),
# compare.sh's server flags, one `somm bench` binary (--client) as the client
# for both, so that only the server differs. Each start first takes 10 s of
# REST load at concurrency 16 (as compare.sh's gRPC sweep comes after its
# REST ones), then two measurements per wire. Prints every measurement with
# the server's queue_p50 (what tells a batcher thread woken in time from one
# that was not), then per build and wire the median q/s and p50, and after
# over before. About 1 minute per start.
#
# Usage: bench/ab_c1.sh --before DIR [--after DIR] [--client BIN] [--starts N]
#                       [--before-flags "F..."] [--after-flags "F..."] [--out DIR]
#   --before-flags, --after-flags  more `somm serve` flags for that build
#                  (e.g. the same build twice, with and without a flag)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
die() { echo "bench/ab_c1.sh: $*" >&2; exit 1; }
BEFORE=""
AFTER=build
CLIENT=""
STARTS=4
OUT=""
BEFORE_FLAGS=""
AFTER_FLAGS=""
while (($#)); do
  case "$1" in
    --before) BEFORE="${2:?}"; shift 2 ;;
    --after) AFTER="${2:?}"; shift 2 ;;
    --client) CLIENT="${2:?}"; shift 2 ;;
    --starts) STARTS="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    --before-flags) BEFORE_FLAGS="$2"; shift 2 ;;
    --after-flags) AFTER_FLAGS="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n "$BEFORE" ]] || die "--before DIR is required"
for dir in "$BEFORE" "$AFTER"; do [[ -x "$dir/somm" ]] || die "no somm binary in $dir"; done
CLIENT="${CLIENT:-$AFTER/somm}"
OUT="${OUT:-bench/out/ab_c1-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
source bench/lib.sh
PY=/usr/bin/python3
INPUT=models/demo/.examples/digit_3.json

measure() {  # build_label start wire port k
  local file="$OUT/$1-s$2-$3-$5.json"
  if ! "$CLIENT" bench digits-mlp -i "$3" --url "127.0.0.1:$4" --concurrency 1 --warmup-s 1 \
    --window-s 3 --max-windows 3 --input "$INPUT" --json "$file" >/dev/null 2>"$file.stderr"; then
    echo "$1 start $2 $3: somm bench failed: $(tail -n 1 "$file.stderr")"
    rm -f "$file"
    return 0
  fi
  "$PY" - "$file" "$1" "$2" "$3" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))["points"][0]
print(f"{sys.argv[2]:6} start {sys.argv[3]} {sys.argv[4]:4} q/s {p['throughput_qps']:7.0f} "
      f"p50 {p['latency_us']['p50']:5.0f} us  server queue_p50 {p['server_us'].get('queue_p50', -1):4.0f} us")
EOF
}

for ((i = 1; i <= STARTS; i++)); do
  order=(before after)
  ((i % 2 == 0)) && order=(after before)
  for label in "${order[@]}"; do
    dir="$BEFORE" flags="$BEFORE_FLAGS"
    [[ "$label" == after ]] && { dir="$AFTER"; flags="$AFTER_FLAGS"; }
    # shellcheck disable=SC2086  # the flags are words
    start_somm_serve "$label" "$dir/somm" "$OUT/$label-s$i" --model-repository models/demo \
      --auto-variants false --managed false $flags
    wait_model_ready "http://127.0.0.1:$SERVED_HTTP_PORT" digits-mlp
    "$CLIENT" bench digits-mlp -i http --url "127.0.0.1:$SERVED_HTTP_PORT" --concurrency 16 \
      --warmup-s 0.5 --window-s 10 --max-windows 1 --input "$INPUT" >/dev/null 2>&1 ||
      die "the REST load failed"
    for k in 1 2; do
      measure "$label" "$i" grpc "$SERVED_GRPC_PORT" "$k"
      measure "$label" "$i" http "$SERVED_HTTP_PORT" "$k"
    done
    stop_pid "$SERVED_PID"
  done
done | tee "$OUT/runs.txt"

"$PY" - "$OUT" <<'EOF'
import glob, json, os, statistics, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "*-s*-*-*.json")):
    label, _, wire, _ = os.path.basename(f)[:-5].split("-")
    p = json.load(open(f))["points"][0]
    rows.setdefault((label, wire), []).append((p["throughput_qps"], p["latency_us"]["p50"]))
print("\n| wire | before q/s (median) | after q/s (median) | after / before | before p50 | after p50 |")
print("|---|---:|---:|---:|---:|---:|")
for wire in ("grpc", "http"):
    b, a = rows.get(("before", wire), []), rows.get(("after", wire), [])
    if not b or not a:
        continue
    bq, aq = statistics.median(x[0] for x in b), statistics.median(x[0] for x in a)
    bp, ap = statistics.median(x[1] for x in b), statistics.median(x[1] for x in a)
    print(f"| {'gRPC' if wire == 'grpc' else 'REST JSON'} | {bq:.0f} | {aq:.0f} | {aq / bq:.3f} | {bp:.0f} us | {ap:.0f} us |")
EOF
