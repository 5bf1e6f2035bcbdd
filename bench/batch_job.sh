#!/usr/bin/env bash
# An offline batch job beside online queries (docs/lifecycle.md): somm serve
# with digits-mlp, a Poisson online load with a latency SLO (`somm bench
# --request-rate`), first alone, then while a job of --items digits (a JSONL
# file, the held-out digits over and over) runs at low priority; the job
# must outlast the online window (it fails otherwise). Then a second job of
# the same items is killed with SIGKILL halfway through, somm starts again,
# the job resumes, and the bench counts its answers: one file per item, none
# missing, none written twice (each is linked once; a second write fails).
#
# Usage: bench/batch_job.sh [--items N] [--rate Q] [--slo-ms MS] [--seconds S] [--skip-build]
# Environment: SOMM_BIN=<binary> runs another build of somm (default build/somm),
# e.g. to compare two commits on the same machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ITEMS=100000
RATE=500
SLO=10
SECS=10
BUILD=1
while (($#)); do
  case "$1" in
    --items) ITEMS="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    --slo-ms) SLO="$2"; shift 2 ;;
    --seconds) SECS="$2"; shift 2 ;;
    --skip-build) BUILD=0; shift ;;
    *) echo "usage: $0 [--items N] [--rate Q] [--slo-ms MS] [--seconds S] [--skip-build]" >&2; exit 2 ;;
  esac
done
((BUILD)) && ninja -C build somm >/dev/null
SOMM="${SOMM_BIN:-build/somm}"
die() { echo "$0: $*" >&2; exit 1; }
source bench/lib.sh
OUT="$(mktemp -d "${TMPDIR:-/tmp}/somm-batch-bench.XXXXXX")"
trap 'kill_children; rm -rf "$OUT"' EXIT
digits_repo "$OUT/repo"
/usr/bin/python3 - "$ITEMS" "$OUT/items.jsonl" <<'PY'
import json, struct, sys
n, path = int(sys.argv[1]), sys.argv[2]
raw = open("models/demo/digits-mlp/1/validation/inputs.bin", "rb").read()
digits = [list(struct.unpack_from("<64f", raw, i * 256)) for i in range(len(raw) // 256)]
with open(path, "w") as f:
    for i in range(n):
        f.write(json.dumps({"id": f"item-{i:07d}", "inputs": [{"name": "pixels", "datatype": "FP32",
                            "shape": [1, 64], "data": digits[i % len(digits)]}]}) + "\n")
PY
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
start_serve() {
  start_somm_serve batch "$SOMM" "$OUT/serve" --repo "$OUT/repo" --log-level warn --auto-variants false
  pid=$SERVED_PID http=$SERVED_HTTP_PORT
  wait_model_ready "http://127.0.0.1:$http" digits-mlp
}
online() {
  "$SOMM" bench digits-mlp -u "127.0.0.1:$http" --input models/demo/.examples/digit_3.json \
    --request-rate "$RATE" --duration-s "$SECS" --slo-ms "$SLO" --warmup-s 2 --json "$OUT/$1.json" >/dev/null 2>&1
  /usr/bin/python3 - "$1" "$OUT/$1.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[2]))["points"][0]
print(f"online load {sys.argv[1]}: {p['request_rate']:.0f} q/s offered, {p['throughput_qps']:.0f} answered, "
      f"SLO attainment {p['slo_attainment']}, p50 {p['latency_us']['p50']} us, p99 {p['latency_us']['p99']} us, "
      f"errors {json.dumps(p['errors'])}")
PY
}
job() { curl -s "127.0.0.1:$http/v2/somm/batch/$1"; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

start_serve
online alone
id=$("$SOMM" batch submit --model digits-mlp --input "$OUT/items.jsonl" --output "$OUT/answers" \
       --url "127.0.0.1:$http" | tail -1)
online "with the job"
s=$(job "$id")
echo "the job at the end of the online window: $(field "$s" done) of $ITEMS items done, $(field "$s" items_per_s) items/s, $(field "$s" state)"
# A job that ended inside the window leaves its tail without the job: the
# comparison above would flatter it.
[[ $(field "$s" state) == RUNNING ]] ||
  die "the job ended before the online window did: use more --items or fewer --seconds"
until [[ $(field "$(job "$id")" state) == DONE ]]; do sleep 0.5; done
echo "the job alone after the window: $(field "$(job "$id")" items_per_s) items/s over its run"
# A second job of the same items, killed with SIGKILL halfway through:
# somm starts again, the job resumes, and every item is answered once.
id=$("$SOMM" batch submit --model digits-mlp --input "$OUT/items.jsonl" --output "$OUT/answers2" \
       --url "127.0.0.1:$http" | tail -1)
t0=$(date +%s.%N)
until (( $(field "$(job "$id")" done) >= ITEMS / 2 )); do sleep 0.2; done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
before=$(find "$OUT/answers2" -name 'item-*.json' | wc -l)
echo "killed somm serve (SIGKILL) with $before answer files written"
start_serve
until [[ $(field "$(job "$id")" state) == DONE ]]; do sleep 0.5; done
t1=$(date +%s.%N)
s=$(job "$id")
answers=$(find "$OUT/answers2" -name 'item-*.json' ! -name '*.error.json' | wc -l)
errors=$(find "$OUT/answers2" -name '*.error.json' | wc -l)
unique=$(find "$OUT/answers2" -name 'item-*.json' -printf '%f\n' | sort -u | wc -l)
echo "resumed from $(field "$s" resumed_from) items; done: $(field "$s" succeeded) succeeded, $(field "$s" failed) failed of $(field "$s" total)"
echo "answer files $answers (distinct names $unique), error files $errors, for $ITEMS items"
echo "the resumed run: $(field "$s" items_per_s) items/s; the whole job $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", b - a}') s including the kill and restart"
(( $(field "$s" resumed_from) > 0 )) || die "the job did not resume from what the killed run wrote"
[[ $answers -eq $ITEMS && $errors -eq 0 ]]
