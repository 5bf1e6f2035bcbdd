#!/usr/bin/env bash
# Canary runs (docs/rollouts.md): a version 2 of digits-mlp rolled out
# under a steady client load, four times: one that answers wrong (split, then
# as a shadow), one that is slower, one that is good. Reports each run's
# client queries (none may fail), the canary's answers before it ended, and
# the rollout's timeline. bench/canary.py does the work.
#
# Usage: bench/canary.sh [--skip-build] [--scenarios wrong,wrong-shadow,slow,good] [--qps N]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=1
ARGS=()
while (($#)); do
  case "$1" in
    --skip-build) BUILD=0; shift ;;
    --scenarios | --qps | --timeout-s | --json) ARGS+=("$1" "$2"); shift 2 ;;
    *) echo "usage: $0 [--skip-build] [--scenarios LIST] [--qps N] [--timeout-s S] [--json FILE]" >&2; exit 2 ;;
  esac
done
((BUILD)) && ninja -C build somm >/dev/null
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec /usr/bin/python3 bench/canary.py --somm build/somm "${ARGS[@]}"
