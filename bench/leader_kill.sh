#!/usr/bin/env bash
# The leader controller's death in simulation, and the routing policies side
# by side: the mixed trace of bench/simulate.sh (make_trace.py --shape mixed,
# five demo models) replayed by `somm simulate --policy somm` on simulated
# workers, first as it is (p2c routing, no kill), then with the leader
# killed at --kill-at seconds for each leader lease in --leases, then with
# --routing-policy least-wait. Prints one markdown table (attainment over
# the replay and over the minute after the kill, the standby's takeover,
# rejections, control actions, instance-seconds) and writes the JSONs to
# bench/out/leader-kill-<timestamp>/.
#
# Usage: bench/leader_kill.sh [--duration-s 1800] [--base-rate 300]
#            [--workers 16] [--kill-at 900] [--leases "1 3 10 30"] [--seed 1]
#            [--out DIR]
# About a minute per row on two cores.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${SOMM_BUILD_DIR:-build}"
PY=/usr/bin/python3
DURATION_S=1800
BASE_RATE=300
WORKERS=16
KILL_AT=900
LEASES="1 3 10 30"
SEED=1
OUT=""
while (($#)); do
  case "$1" in
    --duration-s) DURATION_S="${2:?}"; shift 2 ;;
    --base-rate) BASE_RATE="${2:?}"; shift 2 ;;
    --workers) WORKERS="${2:?}"; shift 2 ;;
    --kill-at) KILL_AT="${2:?}"; shift 2 ;;
    --leases) LEASES="${2:?}"; shift 2 ;;
    --seed) SEED="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/leader_kill.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-bench/out/leader-kill-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"

"$PY" bench/make_trace.py --out "$OUT/trace.csv" --summary-json "$OUT/trace.json" --quiet \
  --seed "$SEED" --duration-s "$DURATION_S" --base-rate "$BASE_RATE" --shape mixed \
  --models resnet18 mobilenet_v3_small digits-cnn digits-mlp digits-logistic --zipf 1.0 \
  --slo-classes tight=0.5:0.2,normal=1:0.5,relaxed=5:0.3

run() {  # name, then extra flags
  local name="$1"
  shift
  "$BUILD_DIR/somm" simulate --repository models/demo --trace "$OUT/trace.csv" --policy somm \
    --workers "$WORKERS" --worker-cores 4 --worker-memory-mb 8192 --seed "$SEED" \
    --json "$OUT/$name.json" --log-level warn "$@" >"$OUT/$name.log" 2>&1
}
ROWS=("p2c, no kill:base")
run base
for L in $LEASES; do
  run "kill-lease-$L" --kill-leader-at "$KILL_AT" --leader-lease-s "$L"
  ROWS+=("p2c, leader killed, ${L}-s lease:kill-lease-$L")
done
run least-wait --routing-policy least-wait
ROWS+=("least-wait, no kill:least-wait")

"$PY" - "$OUT" "$KILL_AT" "${ROWS[@]}" <<'PYEOF'
import json, sys
out, kill_at = sys.argv[1], int(float(sys.argv[2]))
print("| run | attainment | minute after the kill | takeover s | rejections | control actions | instance-s |")
print("|---|---:|---:|---:|---:|---:|---:|")
for row in sys.argv[3:]:
    label, name = row.rsplit(":", 1)
    d = json.load(open(f"{out}/{name}.json"))["policies"]["somm"]
    tl = d["timeline"]
    f = sum(tl["feasible"][kill_at:kill_at + 60]); m = sum(tl["met"][kill_at:kill_at + 60])
    t = d.get("leader_takeover_s", -1)
    print(f"| {label} | {d['attainment']:.4f} | {m / f if f else 1:.4f} | "
          f"{'-' if t < 0 else f'{t:.2f}'} | {d['rejections']:,} | {d['control_actions']} | "
          f"{d['instance_seconds']:,.0f} |")
PYEOF
echo "bench/leader_kill.sh: $OUT"
