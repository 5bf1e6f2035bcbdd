#!/usr/bin/env bash
# The steady-state cost of the cluster state (issue #14): Redis commands per
# second per worker, per router and for the controller, and how stale a
# router's view gets; the figures the simulator scales to 1,000 workers.
#
# For each cluster size (K workers, R routers; default 1x1 2x1 4x1 2x2 4x2)
# it starts real processes on loopback (redis-server, one controller, K
# workers, R routers: bench/lib.sh start_somm_cluster), lets it settle, then
# measures two windows, idle and under a light open-loop load (each router
# gets --rate queries/s of digits-mlp from `somm bench --request-rate`):
# `redis-cli MONITOR` for the window, and CLIENT LIST. somm's processes name
# their Redis connections (`router:router-0.read`, ...; CLIENT SETNAME), so
# every command is attributed by what Redis saw, not computed. How stale a
# router's view gets comes from its own histogram of report ages
# (somm_cluster_view_lag_seconds), read before and after each window.
# bench/cluster_state_report.py turns the captures into OUT/cluster_state.json
# and OUT/report.md.
#
# Usage: bench/cluster_state_cost.sh [--quick] [--skip-build] [--sizes "1x1 2x1 4x1 2x2 4x2"]
#                                    [--window-s S] [--rate Q] [--out DIR]
#   --quick     sizes 1x1 2x2, 5-s windows (a smoke test), ~1.5 min
#   --window-s  length of each window (default 15)
#   --rate      queries/s per router under load (default 20)
# Environment: SOMM_BUILD_DIR=<dir> (default build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

COMMAND="bench/cluster_state_cost.sh${*:+ $*}"
[[ -n "${SOMM_BUILD_DIR:-}" ]] && COMMAND="SOMM_BUILD_DIR=$SOMM_BUILD_DIR $COMMAND"
BUILD_DIR="${SOMM_BUILD_DIR:-build}"
PY=/usr/bin/python3
REPO=models/demo
DO_BUILD=1
SIZES="1x1 2x1 4x1 2x2 4x2"
WINDOW_S=15
SETTLE_S=10
RATE=20
OUT=""
while (($#)); do
  case "$1" in
    --quick) SIZES="1x1 2x2"; WINDOW_S=5; SETTLE_S=5; shift ;;
    --skip-build) DO_BUILD=0; shift ;;
    --sizes) SIZES="${2:?--sizes needs KxR ...}"; shift 2 ;;
    --window-s) WINDOW_S="${2:?--window-s needs seconds}"; shift 2 ;;
    --rate) RATE="${2:?--rate needs queries/s}"; shift 2 ;;
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/cluster_state_cost.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "bench/cluster_state_cost.sh: $*" >&2; exit 1; }
heading() { printf '\n==> %s\n' "$*"; }
source "$ROOT/bench/lib.sh"

if ((DO_BUILD)); then
  heading "build ($BUILD_DIR: somm)"
  cmake --build "$BUILD_DIR" --target somm
fi
SOMM="$BUILD_DIR/somm"
[[ -x "$SOMM" ]] || die "no $SOMM (build it, or set SOMM_BUILD_DIR)"
command -v redis-server >/dev/null || die "redis-server is not installed (scripts/setup installs it)"
[[ -f "$REPO/digits-mlp/1/model.pt" ]] || die "no $REPO/digits-mlp (scripts/setup --skip-packages --skip-build)"
# A copy: a rebuild during the run changes nothing.
BIN_DIR="$(mktemp -d -t somm-state-cost.XXXXXX)"
trap 'kill_children; rm -rf "$BIN_DIR"' EXIT
cp "$SOMM" "$BIN_DIR/somm"
SOMM="$BIN_DIR/somm"

OUT="${OUT:-bench/out/cluster-state-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
DATE_START="$(date -u '+%Y-%m-%d %H:%M UTC')"
GIT_START="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] && GIT_START="$GIT_START + uncommitted changes"
START_S=$SECONDS

# capture NAME STATE K R [QUERIES_FILE]: MONITOR for WINDOW_S seconds, then CLIENT LIST.
capture() {
  local name="$1" state="$2" k="$3" r="$4" queries=0 q i
  # Each router's view-lag histogram (somm_cluster_view_lag_seconds) around
  # the window: how stale its view got.
  for ((i = 0; i < r; ++i)); do
    curl -sf "http://127.0.0.1:${CLUSTER_ROUTER_METRICS[$i]}/metrics" | grep '^somm_cluster_view_lag' \
      >"$OUT/$name.lag-before-$i.prom" || die "router $i exposes no somm_cluster_view_lag_seconds"
  done
  timeout "$WINDOW_S" redis-cli -p "$CLUSTER_REDIS_PORT" MONITOR >"$OUT/$name.monitor" 2>/dev/null || true
  for ((i = 0; i < r; ++i)); do
    curl -sf "http://127.0.0.1:${CLUSTER_ROUTER_METRICS[$i]}/metrics" | grep '^somm_cluster_view_lag' \
      >"$OUT/$name.lag-after-$i.prom" || die "router $i exposes no somm_cluster_view_lag_seconds"
  done
  redis-cli -p "$CLUSTER_REDIS_PORT" CLIENT LIST >"$OUT/$name.clients"
  redis-cli -p "$CLUSTER_REDIS_PORT" INFO commandstats >"$OUT/$name.commandstats"
  if [[ $# -gt 4 ]]; then
    wait "${LOADERS[@]}" || die "a load generator failed (logs: $OUT/$name.load-*.log)"
    for q in "$OUT/$name".load-*.json; do
      queries=$((queries + $("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["points"][0]["count"])' "$q")))
    done
  fi
  "$PY" bench/cluster_state_report.py window "$OUT/$name.window.json" --monitor "$OUT/$name.monitor" \
    --clients "$OUT/$name.clients" --seconds "$WINDOW_S" --workers "$k" --routers "$r" \
    --state "$state" --queries "$queries" --lag "$OUT/$name"
  gzip -f "$OUT/$name.monitor"
}

for size in $SIZES; do
  [[ "$size" =~ ^([0-9]+)x([0-9]+)$ ]] || die "size '$size' is not KxR"
  k="${BASH_REMATCH[1]}" r="${BASH_REMATCH[2]}"
  heading "$k worker(s), $r router(s)"
  # The default deployment: the controller manages (loads on demand,
  # autoscales); heartbeats every second, leases of 3 s.
  start_somm_cluster "$SOMM" "$REPO" "$OUT/logs-${k}x$r" "$k" "$r"
  for ((i = 0; i < r; ++i)); do  # one query each: the model is loaded before measuring
    curl -sf "http://127.0.0.1:${CLUSTER_ROUTER_HTTP[$i]}/v2/models/digits-mlp/infer" \
      -d @"$REPO/.examples/digit_3.json" >/dev/null || die "router $i failed a first query"
  done
  sleep "$SETTLE_S"
  capture "${k}x$r-idle" idle "$k" "$r"
  LOADERS=()
  for ((i = 0; i < r; ++i)); do
    "$SOMM" bench digits-mlp --url "127.0.0.1:${CLUSTER_ROUTER_HTTP[$i]}" --request-rate "$RATE" \
      --duration-s "$WINDOW_S" --warmup-s 0 --input "$REPO/.examples/digit_3.json" --senders 4 \
      --json "$OUT/${k}x$r-load.load-$i.json" >"$OUT/${k}x$r-load.load-$i.log" 2>&1 &
    LOADERS+=($!)
  done
  capture "${k}x$r-load" load "$k" "$r" with-queries
  kill_children
done

heading "report"
cat >"$OUT/meta.json" <<EOF
{"date": "$DATE_START", "git": "$GIT_START", "command": "$COMMAND", "elapsed_s": $((SECONDS - START_S)),
 "settings": "$(nproc) cores shared by every process; worker heartbeat 1 s, lease 3 s; router demand every 1 s; view re-polled every 500 ms; windows of $WINDOW_S s after $SETTLE_S s settling; under load each router gets $RATE queries/s of digits-mlp (Poisson)."}
EOF
"$PY" bench/cluster_state_report.py report "$OUT"
echo "report: $OUT/report.md, $OUT/cluster_state.json   ($((SECONDS - START_S)) s)"
