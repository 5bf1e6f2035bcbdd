#!/usr/bin/env bash
# One build against another, side by side in one run: bench/compare.sh and
# bench/router_hop.sh measure the build before (--before) and the build after
# (--after, default build/) in turn, so that a noisy machine loads both
# alike, and bench/ab_report.py prints, per model, wire and point, each
# build's figures and after over before.
#
# Each round runs compare.sh on both builds, then router_hop.sh on both; the
# order flips every round (before first on odd rounds, after first on even
# ones). compare.sh needs bench_raw_libtorch and bench_grpc_wire_limit beside
# somm: a build that has none (one from before they existed) borrows the
# other build's, which measure libtorch and the wire, not somm. Each build
# runs its own `somm serve` and its own `somm bench` as the client.
#
# About 2 x (13 + 3 x repeats) minutes per round: 44 at the defaults.
#
# Usage: bench/ab.sh --before DIR [--after DIR] [--rounds N] [--repeats N]
#                    [--first-round K] [--only compare|router-hop] [--quick]
#                    [--out DIR]
#   --before DIR   the build directory of the build before (its somm binary)
#   --after DIR    the build after (default build)
#   --rounds N     rounds (default 1)
#   --first-round K  number the rounds from K (default 1): a later run into the
#                  same --out adds rounds to an earlier one, in the order
#                  its numbers give
#   --repeats N    router_hop.sh's repeats per point (default 3)
#   --only X       run only compare.sh or only router_hop.sh
#   --quick        both scripts' --quick (a smoke test; figures are rough)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BEFORE=""
AFTER=build
ROUNDS=1
FIRST=1
REPEATS=3
ONLY=""
QUICK=()
OUT=""
while (($#)); do
  case "$1" in
    --before) BEFORE="${2:?--before needs a build directory}"; shift 2 ;;
    --after) AFTER="${2:?--after needs a build directory}"; shift 2 ;;
    --rounds) ROUNDS="${2:?--rounds needs a number}"; shift 2 ;;
    --first-round) FIRST="${2:?--first-round needs a number}"; shift 2 ;;
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift 2 ;;
    --only) ONLY="${2:?--only needs compare or router-hop}"; shift 2 ;;
    --quick) QUICK=(--quick); shift ;;
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/ab.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$BEFORE" ]] || { echo "bench/ab.sh: --before DIR is required (see --help)" >&2; exit 2; }
case "$ONLY" in "" | compare | router-hop) ;; *) echo "bench/ab.sh: --only compare|router-hop" >&2; exit 2 ;; esac
for dir in "$BEFORE" "$AFTER"; do
  [[ -x "$dir/somm" ]] || { echo "bench/ab.sh: no somm binary in $dir" >&2; exit 2; }
done
OUT="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/somm-ab-XXXXXX")}"
mkdir -p "$OUT"

# Each build as compare.sh and router_hop.sh expect one: a folder with somm
# and the two limit binaries (the build's own where it has them).
stage() {
  local name=$1 dir=$2 other=$3 tool
  local at="$OUT/builds/$name"
  mkdir -p "$at"
  ln -sfn "$(cd "$dir" && pwd)/somm" "$at/somm"
  for tool in bench_raw_libtorch bench_grpc_wire_limit; do
    if [[ -x "$dir/$tool" ]]; then
      ln -sfn "$(cd "$dir" && pwd)/$tool" "$at/$tool"
    elif [[ -x "$other/$tool" ]]; then
      ln -sfn "$(cd "$other" && pwd)/$tool" "$at/$tool"
      echo "bench/ab.sh: $name has no $tool; using $other's" >&2
    fi
  done
  echo "$at"
}
BEFORE_AT=$(stage before "$BEFORE" "$AFTER")
AFTER_AT=$(stage after "$AFTER" "$BEFORE")
{
  echo "before: $BEFORE ($("$BEFORE/somm" --version 2>/dev/null | head -1 || echo 'no --version'))"
  echo "after:  $AFTER ($("$AFTER/somm" --version 2>/dev/null | head -1 || echo 'no --version'))"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "date:   $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt"

run() {  # run <script> <build name> <round>
  local script=$1 name=$2 round=$3 at
  at="$OUT/builds/$name"
  local dest="$OUT/$script/$name-r$round"
  echo "== $script, $name, round $round ($(date -u +%H:%M:%S))"
  case "$script" in
    compare)
      SOMM_BUILD_DIR="$at" bench/compare.sh --skip-build --no-docs "${QUICK[@]}" --out "$dest" \
        >"$dest.log" 2>&1 || { echo "compare.sh failed: $dest.log" >&2; tail -20 "$dest.log" >&2; exit 1; } ;;
    router-hop)
      SOMM_BUILD_DIR="$at" bench/router_hop.sh --skip-build --repeats "$REPEATS" "${QUICK[@]}" \
        --out "$dest" >"$dest.log" 2>&1 ||
        { echo "router_hop.sh failed: $dest.log" >&2; tail -20 "$dest.log" >&2; exit 1; } ;;
  esac
}

mkdir -p "$OUT/compare" "$OUT/router-hop"
for ((round = FIRST; round < FIRST + ROUNDS; round++)); do
  if ((round % 2)); then order=(before after); else order=(after before); fi
  for script in compare router-hop; do
    [[ -z "$ONLY" || "$ONLY" == "$script" ]] || continue
    for name in "${order[@]}"; do run "$script" "$name" "$round"; done
  done
done
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/meta.txt"
/usr/bin/python3 bench/ab_report.py "$OUT" | tee "$OUT/report.md"
echo "report: $OUT/report.md"
