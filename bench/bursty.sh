#!/usr/bin/env bash
# somm against the best-tuned INFaaS on bursty public trace shapes, in the
# simulator: for each shape (make_trace.py --shape azure, twitter; see
# docs/simulation.md "Workloads"), the model-less trace of
# bench/infaas_sweep.sh (the five demo models, Zipf 1.0, tight/normal/relaxed
# SLO classes, half of the rows of models with a task made model-less),
# INFaaS's thresholds swept on it (bench/infaas_sweep.sh), then every policy
# (`somm simulate --policy all`), the best-tuned INFaaS and somm with a
# 250-ms control tick (--control-tick-ms 250) replayed on it.
# bench/bursty_report.py prints one table per shape (attainment, USD, the
# lower bound at that attainment, cost over it) and the per-second
# diagnosis (replica-seconds and misses while the load rises, holds, falls).
#
# Usage: bench/bursty.sh [--shapes "azure twitter"] [--duration-s 1200]
#            [--base-rate 300] [--workers 16] [--seed 1] [--rounds 2]
#            [--out DIR] [--sweep-from DIR]
# --sweep-from DIR reuses the sweeps of an earlier run (DIR/<shape>/sweep),
# so that a change of somm's policy is compared with the same best-tuned
# INFaaS without sweeping again. Writes bench/out/bursty-<timestamp>/ (or
# --out): per shape its sweep, all.json, infaas-tuned.json,
# somm-tick250.json, and report.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD_DIR="${SOMM_BUILD_DIR:-build}"
PY=/usr/bin/python3
REPO=models/demo
SHAPES="azure twitter"
DURATION_S=1200
BASE_RATE=300
WORKERS=16
SEED=1
ROUNDS=2
OUT=""
SWEEP_FROM=""
while (($#)); do
  case "$1" in
    --shapes) SHAPES="${2:?}"; shift 2 ;;
    --duration-s) DURATION_S="${2:?}"; shift 2 ;;
    --base-rate) BASE_RATE="${2:?}"; shift 2 ;;
    --workers) WORKERS="${2:?}"; shift 2 ;;
    --seed) SEED="${2:?}"; shift 2 ;;
    --rounds) ROUNDS="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    --sweep-from) SWEEP_FROM="${2:?}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/bursty.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$BUILD_DIR/somm" ]] || { echo "bench/bursty.sh: build $BUILD_DIR/somm first" >&2; exit 1; }
OUT="${OUT:-bench/out/bursty-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
GIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || GIT="$GIT + uncommitted changes"

for SHAPE in $SHAPES; do
  D="$OUT/$SHAPE"
  mkdir -p "$D"
  if [[ -n "$SWEEP_FROM" ]]; then
    cp -r "$SWEEP_FROM/$SHAPE/sweep" "$D/sweep"
  else
    bench/infaas_sweep.sh --shape "$SHAPE" --duration-s "$DURATION_S" --base-rate "$BASE_RATE" \
      --workers "$WORKERS" --seed "$SEED" --rounds "$ROUNDS" --out "$D/sweep" >"$D/sweep.log"
  fi
  SIM=(--repository "$REPO" --trace "$D/sweep/trace.csv" --workers "$WORKERS" --worker-cores 4
       --worker-memory-mb 8192 --seed "$SEED")
  START=$(date +%s)
  "$BUILD_DIR/somm" simulate "${SIM[@]}" --policy all --json-file "$D/all.json" 2>"$D/simulate.log"
  echo "$(($(date +%s) - START))" >"$D/all.wall_s"
  mapfile -t TUNED < <("$PY" -c 'import json,sys; [print(f) for f in json.load(open(sys.argv[1]))["best"]["flags"]]' "$D/sweep/sweep.json")
  "$BUILD_DIR/somm" simulate "${SIM[@]}" --policy infaas "${TUNED[@]}" \
    --json-file "$D/infaas-tuned.json" 2>>"$D/simulate.log"
  # somm with a 250-ms control tick (the live --control-tick-ms 250).
  "$BUILD_DIR/somm" simulate "${SIM[@]}" --policy somm --control-tick-ms 250 \
    --json-file "$D/somm-tick250.json" 2>>"$D/simulate.log"
done
cat >"$OUT/meta.json" <<JSON
{"date": "$(date -u '+%Y-%m-%d %H:%M UTC')", "git": "$GIT", "command": "bench/bursty.sh${*:+ $*}",
 "shapes": "$SHAPES", "duration_s": $DURATION_S, "base_rate": $BASE_RATE, "workers": $WORKERS,
 "seed": $SEED}
JSON
"$PY" bench/bursty_report.py --dir "$OUT" | tee "$OUT/report.md"
