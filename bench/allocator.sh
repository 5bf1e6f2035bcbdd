#!/usr/bin/env bash
# jemalloc's options against resnet18's throughput (apps/jemalloc_options.cc,
# docs/hostile-input.md "Memory per request"): raw libtorch at batch 8 (the
# limit), then `somm serve` with the options it is built with and with
# MALLOC_CONF set to each alternative, each loaded by `somm bench resnet18`
# over gRPC and REST JSON at concurrency 16 (batches of 8 form), in ROUNDS
# interleaved rounds so that drift in the machine hits every setting alike.
# Prints per round and setting the images/s, then the medians and each
# setting's share of raw libtorch's images/s and of the built-in options'.
#
# Usage: bench/allocator.sh [--rounds N] [--skip-build]
#   the alternatives: "background_thread:false" (the options before dirty
#   pages were purged while idle) and "oversize_threshold:8388608" (jemalloc's
#   default threshold, which the built-in 0 replaced).
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
((BUILD)) && ninja -C build somm bench_raw_libtorch >/dev/null
die() { echo "$0: $*" >&2; exit 1; }
source bench/lib.sh
OUT="$(mktemp -d "${TMPDIR:-/tmp}/somm-allocator.XXXXXX")"
trap 'kill_children; rm -rf "$OUT"' EXIT
REPO="$OUT/repo"
mkdir -p "$REPO/resnet18"
cp models/demo/resnet18/model.yaml "$REPO/resnet18/"
ln -s "$PWD/models/demo/resnet18/1" "$REPO/resnet18/1"
INPUT=models/demo/.examples/resnet_input.json
declare -A CONF=(
  [built-in]=""
  [background_thread:false]="MALLOC_CONF=oversize_threshold:0,background_thread:false"
  [oversize_threshold:8388608]="MALLOC_CONF=oversize_threshold:8388608,background_thread:true"
)
SETTINGS=(built-in background_thread:false oversize_threshold:8388608)
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
samples_per_s() {
  /usr/bin/python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["points"][0]["throughput_sps"], 2))' "$1"
}
echo "round setting wire images/s"
for round in $(seq "$ROUNDS"); do
  # The limit at its best: glibc's malloc would hand resnet18's 25 MB
  # activations back to the kernel after every batch (mmap above its
  # threshold) and fault them in anew, which more than halves raw libtorch
  # here (23 against 62 images/s); these tunables keep them, as somm's
  # jemalloc options do. OMP_WAIT_POLICY as somm serve sets it.
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=2147483647:glibc.malloc.trim_threshold=4294967295 \
    OMP_WAIT_POLICY=PASSIVE build/bench_raw_libtorch --model models/demo/resnet18/1/model.pt --shape 3,224,224 -b 8 -t 2 \
    -c 1 --warmup-s 2 --window-s 3 --max-windows 4 --json "$OUT/raw.json" >/dev/null
  echo "$round raw-libtorch-b8 inprocess $(samples_per_s "$OUT/raw.json")" | tee -a "$OUT/rows"
  for setting in "${SETTINGS[@]}"; do
    SERVE_ENV=()
    [[ -n "${CONF[$setting]}" ]] && SERVE_ENV=("${CONF[$setting]}")
    start_somm_serve "$setting" build/somm "$OUT/serve" --repo "$REPO" --log-level warn \
      --auto-variants false --managed false
    for wire in grpc rest; do
      port=$SERVED_GRPC_PORT
      [[ $wire == rest ]] && port=$SERVED_HTTP_PORT
      build/somm bench resnet18 -u "127.0.0.1:$port" -i "${wire/rest/http}" --concurrency 16 \
        --input "$INPUT" --warmup-s 3 --window-s 4 --max-windows 3 --json "$OUT/r.json" \
        >/dev/null 2>"$OUT/bench.err" || { cat "$OUT/bench.err" >&2; exit 1; }
      echo "$round $setting $wire $(samples_per_s "$OUT/r.json")" | tee -a "$OUT/rows"
    done
    stop_pid "$SERVED_PID"
  done
done
echo "medians over $ROUNDS round(s): setting wire images/s share_of_raw share_of_built-in"
/usr/bin/python3 - "$OUT/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, setting, wire, sps = line.split()
    rows.setdefault((setting, wire), []).append(float(sps))
med = {k: statistics.median(v) for k, v in rows.items()}
raw = med[("raw-libtorch-b8", "inprocess")]
for (setting, wire), v in med.items():
    base = med.get(("built-in", wire), v)
    print(f"{setting} {wire} {v:.2f} {v / raw:.3f} {v / base:.3f}")
PY
