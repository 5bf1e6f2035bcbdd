#!/usr/bin/env bash
# The simulator's side-by-side comparison: a mixed-shape trace (spiky,
# diurnal and surge thirds, Zipf popularity, tight/normal/relaxed SLO
# classes) from bench/make_trace.py, replayed by `somm simulate --policy all`
# (somm, INFaaS as its paper reads, static peak, static average, the offline
# oracle) on simulated workers with the demo zoo's persisted profiles, and
# the table from bench/simulate_report.py written to bench/out/<timestamp>/
# and into docs/simulation.md (between its simulate.sh markers).
#
# Usage: bench/simulate.sh [--duration-s S] [--base-rate Q] [--workers N]
#            [--worker-cores C] [--worker-memory-mb M] [--seed S]
#            [--skip-build] [--no-docs] [--out DIR]
# Defaults: 1800 s at 300 q/s over the five demo models, 16 workers of 4 cores
# and 8 GiB, seed 1: about a minute on two cores.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

COMMAND="bench/simulate.sh${*:+ $*}"
BUILD_DIR="${SOMM_BUILD_DIR:-build}"
PY=/usr/bin/python3
REPO=models/demo
DURATION_S=1800
BASE_RATE=300
WORKERS=16
WORKER_CORES=4
WORKER_MEMORY_MB=8192
SEED=1
DO_BUILD=1
DO_DOCS=1
OUT=""
while (($#)); do
  case "$1" in
    --duration-s) DURATION_S="${2:?}"; shift 2 ;;
    --base-rate) BASE_RATE="${2:?}"; shift 2 ;;
    --workers) WORKERS="${2:?}"; shift 2 ;;
    --worker-cores) WORKER_CORES="${2:?}"; shift 2 ;;
    --worker-memory-mb) WORKER_MEMORY_MB="${2:?}"; shift 2 ;;
    --seed) SEED="${2:?}"; shift 2 ;;
    --skip-build) DO_BUILD=0; shift ;;
    --no-docs) DO_DOCS=0; shift ;;
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/simulate.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

OUT="${OUT:-bench/out/simulate-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
GIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  GIT="$GIT + uncommitted changes"
fi
if ((DO_BUILD)); then
  ninja -C "$BUILD_DIR" somm >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi

"$PY" bench/make_trace.py --out "$OUT/trace.csv" --summary-json "$OUT/trace.json" --quiet \
  --seed "$SEED" --duration-s "$DURATION_S" --base-rate "$BASE_RATE" --shape mixed \
  --models resnet18 mobilenet_v3_small digits-cnn digits-mlp digits-logistic --zipf 1.0 \
  --slo-classes tight=0.5:0.2,normal=1:0.5,relaxed=5:0.3

START=$(date +%s)
"$BUILD_DIR/somm" simulate --repository "$REPO" --trace "$OUT/trace.csv" --policy all \
  --workers "$WORKERS" --worker-cores "$WORKER_CORES" --worker-memory-mb "$WORKER_MEMORY_MB" \
  --seed "$SEED" --json "$OUT/sim.json" 2>&1 | tee "$OUT/simulate.log"
WALL=$(($(date +%s) - START))

cat >"$OUT/meta.json" <<JSON
{"date": "$(date -u '+%Y-%m-%d %H:%M UTC')", "git": "$GIT", "command": "$COMMAND",
 "workers": $WORKERS, "worker_cores": $WORKER_CORES, "worker_memory_mb": $WORKER_MEMORY_MB,
 "repository": "$REPO", "seed": $SEED, "wall_s": $WALL}
JSON
DOCS=()
((DO_DOCS)) && DOCS=(--docs docs/simulation.md)
# The report links the plot by its name: next to report.md, and in docs/.
"$PY" bench/simulate_report.py --sim "$OUT/sim.json" --trace-summary "$OUT/trace.json" \
  --meta "$OUT/meta.json" --out "$OUT/report.md" --plot "$OUT/simulation-cost.svg" "${DOCS[@]}"
((DO_DOCS)) && cp "$OUT/simulation-cost.svg" docs/simulation-cost.svg
echo "bench/simulate.sh: $OUT (simulate took ${WALL} s)"
