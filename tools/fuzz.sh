#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan + UBSan, in build-fuzz/)
# and runs each for a bounded time from its seed corpus, fuzz/corpus/<target>/.
# Exits non-zero when any target crashes, leaks, trips a sanitizer or breaks
# one of its invariants; the input that did it is kept as
# <out>/<target>/crash-* (reproduce: build-fuzz/fuzz_<target> <that file>).
#
# Usage: tools/fuzz.sh [--seconds S] [--jobs J] [--out DIR] [target...]
#   --seconds  time per target (default 20: the bounded run scripts/test does;
#              use 600 or more for a real search)
#   --jobs     parallel fuzzing processes per target (default 1); targets run
#              side by side, nproc / jobs at a time
#   --out      where new inputs, crash files and logs go (default: a temp dir)
#   target     http_request infer_request model_yaml registration trace_csv torch_pickle
#              grpc_request
#              (default: all)
# The seed corpora in the repository are only read; to grow one, copy
# interesting inputs from <out>/<target>/corpus/ by hand (libFuzzer's -merge=1
# keeps only those adding coverage).
# Prints one line per target: executions, coverage (libFuzzer's cov: and ft:)
# and the outcome.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
jobs=1
out=""
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then
  targets=(http_request infer_request model_yaml registration trace_csv grpc_request torch_pickle
           image_decode pipeline_yaml)
fi

cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz >/dev/null
if [[ -z "$out" ]]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/somm-fuzz.XXXXXX")
fi

# One target's bounded run; its summary line goes to $out/<target>/result
# (exit status first), so targets can run side by side and still print in order.
fuzz_one() {
  local t=$1 dir="$out/$1" rc=0
  mkdir -p "$dir/corpus"
  local log="$dir/fuzz.log"
  # The first corpus folder receives new inputs; the seeds stay untouched.
  # -rss_limit_mb and -malloc_limit_mb catch a decoder that allocates what a
  # hostile length asks for; the limits leave room for ASan's own overhead.
  local args=(-max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=512
              -timeout=10 -print_final_stats=1 -artifact_prefix="$dir/")
  if ((jobs > 1)); then
    args+=(-jobs="$jobs" -workers="$jobs")
  fi
  build-fuzz/fuzz_"$t" "${args[@]}" "$dir/corpus" "fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  local execs cov
  # A crash can leave no stats line: the summary must still be written.
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{s+=$2} END {print s+0}' || true)
  cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
  {
    echo "$rc"
    if ((rc == 0)); then
      echo "fuzz_$t: ok, ${execs} executions in ${seconds}s, ${cov:-no coverage line}"
    else
      echo "fuzz_$t: FAILED (exit $rc), ${execs} executions, ${cov:-no coverage line}; log $log"
      grep -E 'ERROR|SUMMARY|runtime error|deadly signal|Test unit written' "$log" | head -20 || true
    fi
  } >"$dir/result"
}

# Each libFuzzer process is single-threaded, so as many targets as there are
# cores (divided by --jobs) run at once; each still gets its full --seconds.
parallel=$(( $(nproc) / jobs ))
((parallel >= 1)) || parallel=1
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

failed=0
for t in "${targets[@]}"; do
  result="$out/$t/result"
  if [[ ! -f "$result" ]]; then
    failed=1
    echo "fuzz_$t: FAILED, no result (the run did not finish)"
    continue
  fi
  [[ "$(head -1 "$result")" == 0 ]] || failed=1
  tail -n +2 "$result"
done
echo "fuzzing output in $out"
exit $failed
