#!/usr/bin/env bash
# The simulator against the live system (issue #15, fidelity): bench/managed.sh
# replays its trace against a live `somm serve --managed true` on this machine;
# `somm simulate` then replays the same trace through the same router and
# controller code on one simulated worker with this machine's cores and the
# live server's memory budget, using the profiles the live repository
# persisted, once per seed; bench/fidelity_report.py compares attainment and
# instance-seconds (targets: within 0.5 points and 15%).
#
# Usage: bench/fidelity.sh [--out DIR] [--seeds N] [--skip-build] [managed.sh options...]
#   --out DIR     where managed.sh writes (default bench/out/fidelity-<timestamp>)
#   --seeds N     simulated replays, seeds 1..N (default 3)
# Other options go to bench/managed.sh (for example --quick, --scenario busy).
# Output: DIR/report.md (the table); exit status 1 when a target is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "bench/fidelity.sh: $*" >&2; exit 2; }
OUT="bench/out/fidelity-$(date -u +%Y%m%d-%H%M%S)"
SEEDS=3
PASS=()
while (($#)); do
  case "$1" in
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    --seeds) SEEDS="${2:?--seeds needs a number}"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) PASS+=("$1"); shift ;;
  esac
done
BUILD_DIR="${SOMM_BUILD_DIR:-build}"
PY=/usr/bin/python3

bench/managed.sh --require-managed --no-docs --targets somm-managed --out "$OUT" "${PASS[@]}"
REPO="$OUT/repo-somm-managed"
[[ -d "$REPO/.somm" ]] || die "$REPO has no persisted profiles"
# The live server's memory budget, as it logged it at start.
BUDGET_MB=$(grep -ho "memory budget for instances: [0-9]* MiB" "$OUT/somm-managed/server.stderr" \
  "$OUT/somm-managed/server.stdout" 2>/dev/null | head -1 | grep -o "[0-9]*" | head -1 || true)
[[ -n "$BUDGET_MB" ]] || die "cannot find the live server's memory budget in its log"
TIME_SCALE=$("$PY" -c 'import json,re,sys; m=re.search(r"--time-scale ([0-9.]+)", json.load(open(sys.argv[1]))["trace"]); print(m.group(1) if m else 1)' "$OUT/meta.json")
SIMS=()
for SEED in $(seq "$SEEDS"); do
  "$BUILD_DIR/somm" simulate --repository "$REPO" --trace "$OUT/trace.csv" --policy somm \
    --workers 1 --worker-cores "$(nproc)" --worker-memory-mb "$BUDGET_MB" --time-scale "$TIME_SCALE" \
    --seed "$SEED" --json "$OUT/sim-seed$SEED.json" 2>>"$OUT/simulate.log" | tail -1
  SIMS+=("$OUT/sim-seed$SEED.json")
done
STATUS=0
"$PY" bench/fidelity_report.py --managed "$OUT" "${SIMS[@]}" >"$OUT/fidelity.md" || STATUS=$?
cat "$OUT/fidelity.md"
echo "bench/fidelity.sh: $OUT/fidelity.md"
exit "$STATUS"
