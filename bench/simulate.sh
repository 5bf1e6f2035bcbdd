#!/usr/bin/env bash
# The simulator's side-by-side comparison: a mixed-shape trace (spiky,
# diurnal and surge thirds, Zipf popularity, tight/normal/relaxed SLO
# classes) from bench/make_trace.py, replayed by `somm simulate --policy all`
# (somm, INFaaS as ported from its released master, static peak, static average, the
# clairvoyant heuristic), each with its cost over the lower bound on cost at
# its attainment, on simulated workers with the demo zoo's persisted profiles, and
# the table from bench/simulate_report.py written to bench/out/<timestamp>/
# and into docs/simulation.md (between its simulate.sh markers).
#
# Usage: bench/simulate.sh [--duration-s S] [--base-rate Q] [--workers N]
#            [--worker-cores C] [--worker-memory-mb M] [--seed S]
#            [--skip-build] [--no-docs] [--out DIR] [--scale] [--scale-only]
#            [--repository DIR] [--models "M1 M2 ..."] [--model-less SHARE]
#            [--routers N] [--shape mixed|azure|twitter|...]
#            [--infaas-tuned "NAME=VALUE ..."] [--scale-model-less 0.5]
#            [--scale-no-failures]
# Defaults: 1800 s at 300 q/s over the five demo models, 16 workers of 4 cores
# and 8 GiB, seed 1: about a minute on two cores.
#
# --model-less SHARE turns that share of the rows of models that name a task
# into model-less rows of the task (bench/model_less_rows.py: a min_accuracy
# of 0.95 or 0.9 on 30% each, a max_cost no variant meets on 10%) before the
# replay; its table is not the published one, so it implies --no-docs.
# --shape is make_trace.py's (default mixed, the published trace; azure and
# twitter are the bursty public shapes); another than mixed implies --no-docs.
# --routers N puts N routers in front of the workers (somm simulate
# --routers: round-robin, each with its own view; default 1).
# --repository and --models replace models/demo and its five models (a
# repository whose profiles lack a model cannot replay that model).
#
# --scale adds the runs at scale (bench/simulate_scale_report.py writes them
# into docs/simulation.md between its own markers): a synthetic zoo of
# 10,000 variants (bench/make_zoo.py --variants --split-tasks), one hour of
# the mixed trace at 2,000 q/s with --scale-model-less of its rows (default
# 0.5) made model-less, replayed on 1,000 workers by every policy (somm,
# INFaaS with --infaas-tuned's thresholds, static peak and average, the
# clairvoyant heuristic), each under /usr/bin/time -v (wall time and peak
# RSS), and the failure experiment: 5%
# of 100 workers killed at the busiest second of a 600-s diurnal trace over
# 250 of those models, for each lease time (1, 3, 10 s) and provisioning
# delay (10, 30, 120 s), beside the same run without a failure. About half
# an hour more (the hour's trace alone takes minutes to generate).
# --scale-only skips the side-by-side comparison; --scale-no-failures skips
# the failure experiment.
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
SCALE=0
COMPARE=1
MODELS=(resnet18 mobilenet_v3_small digits-cnn digits-mlp digits-logistic)
MODEL_LESS=""
SCALE_MODEL_LESS=0.5
FAILURES=1
# bench/infaas_sweep.sh's best-tuned INFaaS on the model-less trace
# (docs/simulation.md, "INFaaS tuned").
INFAAS_TUNED="blacklist_latency_factor=4 not_loaded_penalty_ms=0 loose_slo_ms=50 max_replicas=4 vm_blacklist_util=0.95 burst_queries=400"
ROUTERS=1
SHAPE=mixed
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
    --scale) SCALE=1; shift ;;
    --scale-only) SCALE=1; COMPARE=0; shift ;;
    --repository) REPO="${2:?}"; shift 2 ;;
    --models) read -r -a MODELS <<<"${2:?}"; shift 2 ;;
    --model-less) MODEL_LESS="${2:?}"; DO_DOCS=0; shift 2 ;;
    --routers) ROUTERS="${2:?}"; shift 2 ;;
    --infaas-tuned) INFAAS_TUNED="${2?}"; shift 2 ;;
    --scale-model-less) SCALE_MODEL_LESS="${2:?}"; shift 2 ;;
    --scale-no-failures) FAILURES=0; shift ;;
    --shape) SHAPE="${2:?}"; [[ "$SHAPE" == mixed ]] || DO_DOCS=0; shift 2 ;;
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

if ((COMPARE)); then
"$PY" bench/make_trace.py --out "$OUT/trace.csv" --summary-json "$OUT/trace.json" --quiet \
  --seed "$SEED" --duration-s "$DURATION_S" --base-rate "$BASE_RATE" --shape "$SHAPE" \
  --models "${MODELS[@]}" --zipf 1.0 \
  --slo-classes tight=0.5:0.2,normal=1:0.5,relaxed=5:0.3
if [[ -n "$MODEL_LESS" ]]; then
  "$PY" bench/model_less_rows.py --trace "$OUT/trace.csv" --repository "$REPO" \
    --out "$OUT/trace-model-less.csv" --share "$MODEL_LESS" --seed "$SEED"
  mv "$OUT/trace-model-less.csv" "$OUT/trace.csv"
fi

START=$(date +%s)
"$BUILD_DIR/somm" simulate --repository "$REPO" --trace "$OUT/trace.csv" --policy all \
  --workers "$WORKERS" --worker-cores "$WORKER_CORES" --worker-memory-mb "$WORKER_MEMORY_MB" \
  --routers "$ROUTERS" --seed "$SEED" --json "$OUT/sim.json" 2>&1 | tee "$OUT/simulate.log"
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
fi

if ((SCALE)); then
  ZOO="$OUT/zoo"
  "$PY" bench/make_zoo.py --out "$ZOO" --variants 10000 --seed "$SEED" --slo-refs "$OUT/slo-refs.txt" \
    --split-tasks | tee "$OUT/make_zoo.log"
  mapfile -t REFS <"$OUT/slo-refs.txt"
  MODELS=() REF_ARGS=()
  for r in "${REFS[@]}"; do MODELS+=("${r%%=*}"); REF_ARGS+=(--slo-ref "$r"); done
  CLASSES=tight=0.5:0.2,normal=1:0.5,relaxed=5:0.3
  "$PY" bench/make_trace.py --out "$OUT/scale-trace.csv" --summary-json "$OUT/scale-trace.json" \
    --quiet --seed "$SEED" --duration-s 3600 --base-rate 2000 --shape mixed --models "${MODELS[@]}" \
    --zipf 1.0 --slo-classes "$CLASSES" "${REF_ARGS[@]}"
  # Model-less: half the rows of the hour name their model's task instead
  # (each round of the zoo's source models has tasks of its own, --split-tasks).
  "$PY" bench/model_less_rows.py --trace "$OUT/scale-trace.csv" --repository "$ZOO" \
    --out "$OUT/scale-trace-model-less.csv" --share "$SCALE_MODEL_LESS" --seed "$SEED"
  mv "$OUT/scale-trace-model-less.csv" "$OUT/scale-trace.csv"
  # Every policy over the same hour, each timed on its own (/usr/bin/time -v):
  # somm, INFaaS best-tuned (--infaas-tuned, bench/infaas_sweep.sh's pick),
  # static peak and average, and the clairvoyant heuristic.
  read -r -a TUNED <<<"$INFAAS_TUNED"
  TUNED_ARGS=()
  for t in "${TUNED[@]}"; do TUNED_ARGS+=(--infaas "$t"); done
  for P in somm infaas static-peak static-avg clairvoyant; do
    EXTRA=()
    [[ "$P" == infaas ]] && EXTRA=("${TUNED_ARGS[@]}")
    NAME="scale-$P"
    [[ "$P" == somm ]] && NAME=scale
    /usr/bin/time -v -o "$OUT/$NAME.time" "$BUILD_DIR/somm" simulate --repository "$ZOO" \
      --trace "$OUT/scale-trace.csv" --policy "$P" --workers 1000 --worker-cores "$WORKER_CORES" \
      --worker-memory-mb "$WORKER_MEMORY_MB" --seed "$SEED" "${EXTRA[@]}" --json "$OUT/$NAME.json" \
      2>>"$OUT/scale.log" | tail -1
  done
  grep -E "^(somm|infaas|static|clairvoyant) " "$OUT/scale.log" || true

  # The failure experiment: 250 models, 100 workers, a diurnal day in 600 s.
  F="$OUT/failures"
  if ((FAILURES)); then
  mkdir -p "$F"
  "$PY" bench/make_trace.py --out "$F/trace.csv" --summary-json "$F/trace.json" --quiet \
    --seed "$SEED" --duration-s 600 --base-rate 300 --shape diurnal --models "${MODELS[@]:0:250}" \
    --zipf 1.0 --slo-classes "$CLASSES" "${REF_ARGS[@]:0:500}"
  FAIL_AT=$("$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); c=s["shape"]["per_second"]; print(max(range(len(c)), key=c.__getitem__))' "$F/trace.json")
  FAIL=(--repository "$ZOO" --trace "$F/trace.csv" --policy somm --workers 100
        --worker-cores "$WORKER_CORES" --worker-memory-mb "$WORKER_MEMORY_MB" --seed "$SEED")
  "$BUILD_DIR/somm" simulate "${FAIL[@]}" --json "$F/base.json" 2>>"$F/simulate.log"
  for LEASE in 1 3 10; do
    for DELAY in 10 30 120; do
      "$BUILD_DIR/somm" simulate "${FAIL[@]}" --fail-at "$FAIL_AT" --fail-fraction 0.05 \
        --lease-s "$LEASE" --provision-delay-s "$DELAY" --json "$F/lease$LEASE-delay$DELAY.json" \
        2>>"$F/simulate.log"
    done
  done
  cat >"$F/meta.json" <<JSON
{"fail_at_s": $FAIL_AT, "fail_fraction": 0.05, "workers": 100,
 "trace": "make_trace.py --shape diurnal, 600 s at a mean of 300 q/s over 250 of the synthetic models"}
JSON
  fi
  cat >"$OUT/meta.json" <<JSON
{"date": "$(date -u '+%Y-%m-%d %H:%M UTC')", "git": "$GIT", "command": "$COMMAND",
 "zoo_models": $(find "$ZOO" -mindepth 2 -maxdepth 2 -name model.yaml | wc -l), "zoo_variants": $(find "$ZOO/.somm/variants" -name profile.json | wc -l),
 "scale_workers": 1000, "worker_cores": $WORKER_CORES, "worker_memory_mb": $WORKER_MEMORY_MB,
 "model_less": $SCALE_MODEL_LESS, "infaas_tuned": "$INFAAS_TUNED"}
JSON
  DOCS=()
  ((DO_DOCS)) && DOCS=(--docs docs/simulation.md)
  "$PY" bench/simulate_scale_report.py --dir "$OUT" "${DOCS[@]}" >/dev/null
  if ((DO_DOCS)); then
    cp "$OUT/simulation-timeline.svg" "$OUT/simulation-failure.svg" "$OUT/simulation-scale-cost.svg" docs/
  fi
  rm -rf "$ZOO" "$OUT/scale-trace.csv"
  echo "bench/simulate.sh: $OUT/scale.md"
fi
