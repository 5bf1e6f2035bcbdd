#!/usr/bin/env bash
# Sweeps the INFaaS policy's free thresholds (src/simulator/infaas_policy.h,
# InfaasOptions: the released values by default) on the model-less trace of
# `bench/simulate.sh --model-less 0.5 --duration-s 300` (make_trace.py's
# mixed shape over the five demo models, then half of the rows of models
# with a task made model-less by bench/model_less_rows.py), and picks the
# best-tuned INFaaS: the highest attainment, then the lowest cost.
#
# The search is by coordinates, bounded: from the released defaults, each
# threshold of bench/infaas_sweep.py's grid in turn is tried at its few
# values with the others at the best found so far, and the best value is
# kept; the pass runs twice (--rounds N). One `somm simulate --policy infaas`
# per setting, with --infaas NAME=VALUE; about 45 runs, about a minute on
# two cores. Prints one line per setting and the default against the
# best-tuned; bench/out/infaas-sweep-<timestamp>/ keeps the trace, every
# run's JSON, sweep.json and report.md.
#
# Usage: bench/infaas_sweep.sh [--duration-s 300] [--base-rate 300]
#            [--model-less 0.5] [--workers 16] [--worker-cores 4]
#            [--worker-memory-mb 8192] [--seed 1] [--rounds 2] [--out DIR]
#            [--shape mixed|azure|twitter|...]
# --shape is make_trace.py's (default mixed, the published trace; azure and
# twitter are the bursty public shapes, docs/simulation.md "Workloads").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD_DIR="${SOMM_BUILD_DIR:-build}"
PY=/usr/bin/python3
REPO=models/demo
DURATION_S=300
BASE_RATE=300
MODEL_LESS=0.5
WORKERS=16
WORKER_CORES=4
WORKER_MEMORY_MB=8192
SEED=1
SHAPE=mixed
ROUNDS=2
OUT=""
MODELS=(resnet18 mobilenet_v3_small digits-cnn digits-mlp digits-logistic)
while (($#)); do
  case "$1" in
    --duration-s) DURATION_S="${2:?}"; shift 2 ;;
    --base-rate) BASE_RATE="${2:?}"; shift 2 ;;
    --model-less) MODEL_LESS="${2:?}"; shift 2 ;;
    --workers) WORKERS="${2:?}"; shift 2 ;;
    --worker-cores) WORKER_CORES="${2:?}"; shift 2 ;;
    --worker-memory-mb) WORKER_MEMORY_MB="${2:?}"; shift 2 ;;
    --seed) SEED="${2:?}"; shift 2 ;;
    --rounds) ROUNDS="${2:?}"; shift 2 ;;
    --shape) SHAPE="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/infaas_sweep.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$BUILD_DIR/somm" ]] || { echo "bench/infaas_sweep.sh: build $BUILD_DIR/somm first" >&2; exit 1; }

OUT="${OUT:-bench/out/infaas-sweep-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
# The trace, as bench/simulate.sh --model-less writes it.
"$PY" bench/make_trace.py --out "$OUT/trace.csv" --summary-json "$OUT/trace.json" --quiet \
  --seed "$SEED" --duration-s "$DURATION_S" --base-rate "$BASE_RATE" --shape "$SHAPE" \
  --models "${MODELS[@]}" --zipf 1.0 \
  --slo-classes tight=0.5:0.2,normal=1:0.5,relaxed=5:0.3
"$PY" bench/model_less_rows.py --trace "$OUT/trace.csv" --repository "$REPO" \
  --out "$OUT/trace-model-less.csv" --share "$MODEL_LESS" --seed "$SEED"
mv "$OUT/trace-model-less.csv" "$OUT/trace.csv"

"$PY" bench/infaas_sweep.py --somm "$BUILD_DIR/somm" --out "$OUT" --rounds "$ROUNDS" -- \
  --repository "$REPO" --trace "$OUT/trace.csv" --policy infaas --workers "$WORKERS" \
  --worker-cores "$WORKER_CORES" --worker-memory-mb "$WORKER_MEMORY_MB" --seed "$SEED"
