#!/usr/bin/env bash
# The cost of security (docs/security.md): digits-mlp served by `somm serve`
# plain (--auth none), with API keys (--auth keys, every query carrying a
# user's key), and with keys and TLS on every port (scripts/make-certs), the
# same closed-loop load from `somm bench` against each: REST JSON (`somm
# bench` speaks plain HTTP, so not with TLS) and gRPC; then REST again from
# Debian's `wrk` (one thread, the same connections), which speaks HTTPS, so
# REST has a keys+TLS row too ("rest-wrk"; a non-2xx answer fails the bench).
# Throughput, p50, p99 and each as a share of the plain server's in the same
# round and from the same load generator.
#
# --baseline BIN adds the rows "base-plain" and "base-keys": the same loads
# against BIN serve (somm built from an earlier commit, e.g. in a git
# worktree), in the same rounds, so a change's cost on the hot path reads as
# this build's keys row over the baseline's (printed last). The load
# generators are this build's in every row.
#
# Usage: bench/security_cost.sh [--rounds N] [--concurrency C] [--skip-build] [--baseline BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3
CONC=16
BUILD=1
BASELINE=""
while (($#)); do
  case "$1" in
    --baseline) BASELINE="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --concurrency) CONC="$2"; shift 2 ;;
    --skip-build) BUILD=0; shift ;;
    *) echo "usage: $0 [--rounds N] [--concurrency C] [--skip-build] [--baseline BIN]" >&2; exit 2 ;;
  esac
done
((BUILD)) && ninja -C build somm >/dev/null
die() { echo "$0: $*" >&2; exit 1; }
source bench/lib.sh
command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/somm-security-cost.XXXXXX")"
trap 'kill_children; rm -rf "$OUT"' EXIT
digits_repo "$OUT/repo"
scripts/make-certs "$OUT/certs" >/dev/null
KEY=$(build/somm keys create --repo "$OUT/repo" --tenant bench --role user | tail -1)
SETUPS=(plain keys keys+tls)
if [[ -n "$BASELINE" ]]; then
  [[ -x "$BASELINE" ]] || die "--baseline $BASELINE is not an executable"
  # Its own repository and key file, made by itself (the key file's format
  # may differ between the builds).
  digits_repo "$OUT/base-repo"
  BASE_KEY=$("$BASELINE" keys create --repo "$OUT/base-repo" --tenant bench --role user | tail -1)
  SETUPS+=(base-plain base-keys)
  echo "baseline: $BASELINE ($("$BASELINE" --version 2>/dev/null || echo "no --version"))"
fi
wrk_post_script "$OUT/post.lua" models/demo/.examples/digit_3.json
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round setup wire samples/s p50_us p99_us share_of_plain"
declare -A PLAIN
for round in $(seq "$ROUNDS"); do
  for setup in "${SETUPS[@]}"; do
    args=(--auth none)
    [[ $setup != *plain ]] && args=(--auth keys)
    [[ $setup == keys+tls ]] && args+=(--tls-cert "$OUT/certs/server.pem" --tls-key "$OUT/certs/server.key")
    bin=build/somm repo="$OUT/repo" key_of_setup="$KEY"
    [[ $setup == base-* ]] && bin="$BASELINE" repo="$OUT/base-repo" key_of_setup="$BASE_KEY"
    start_somm_serve "$setup" "$bin" "$OUT/serve" --repo "$repo" --log-level warn \
      --auto-variants false "${args[@]}"
    pid=$SERVED_PID http=$SERVED_HTTP_PORT grpc=$SERVED_GRPC_PORT
    scheme=http
    [[ $setup == keys+tls ]] && scheme=https
    until curl -sfk "$scheme://127.0.0.1:$http/v2/health/ready" >/dev/null; do sleep 0.2; done
    for wire in rest grpc; do
      [[ $setup == keys+tls && $wire == rest ]] && continue
      bargs=(-u "127.0.0.1:$http")
      [[ $wire == grpc ]] && bargs=(-u "127.0.0.1:$grpc" -i grpc)
      [[ $setup == keys+tls ]] && bargs+=(--tls-ca "$OUT/certs/ca.pem")
      key=()
      [[ $setup != *plain ]] && key=(--api-key "$key_of_setup")
      build/somm bench digits-mlp "${bargs[@]}" "${key[@]}" --input models/demo/.examples/digit_3.json \
        --concurrency "$CONC" --warmup-s 2 --window-s 3 --max-windows 4 --json "$OUT/r.json" \
        >/dev/null 2>"$OUT/bench.err" || { cat "$OUT/bench.err" >&2; exit 1; }
      read -r sps p50 p99 < <(/usr/bin/python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["points"][0]
print(round(p["throughput_sps"], 1), p["latency_us"]["p50"], p["latency_us"]["p99"])' "$OUT/r.json")
      [[ $setup == plain ]] && PLAIN[$wire]=$sps
      share=$(awk -v a="$sps" -v b="${PLAIN[$wire]}" 'BEGIN {printf "%.3f", a / b}')
      echo "$round $setup $wire $sps $p50 $p99 $share" | tee -a "$OUT/rows"
    done
    wrk_args=(-t1 -c "$CONC" -s "$OUT/post.lua")
    [[ $setup != *plain ]] && wrk_args+=(-H "Authorization: Bearer $key_of_setup")
    url="$scheme://127.0.0.1:$http/v2/models/digits-mlp/infer"
    wrk "${wrk_args[@]}" -d 2s "$url" >/dev/null  # warm-up, as somm bench's --warmup-s
    wrk "${wrk_args[@]}" -d 12s "$url" >"$OUT/wrk.txt"
    read -r sps p50 p99 errors < <(grep '^RESULT' "$OUT/wrk.txt" | cut -d' ' -f2-) ||
      die "no result from wrk ($setup): $(cat "$OUT/wrk.txt")"
    ((errors == 0)) || die "wrk saw $errors failed requests ($setup): $(cat "$OUT/wrk.txt")"
    [[ $setup == plain ]] && PLAIN[rest-wrk]=$sps
    share=$(awk -v a="$sps" -v b="${PLAIN[rest-wrk]}" 'BEGIN {printf "%.3f", a / b}')
    echo "$round $setup rest-wrk $sps $p50 $p99 $share" | tee -a "$OUT/rows"
    stop_pid "$pid"
  done
done
echo "medians over $ROUNDS round(s): setup wire samples/s p50_us p99_us share_of_plain"
/usr/bin/python3 - "$OUT/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, setup, wire, *nums = line.split()
    rows.setdefault((setup, wire), []).append([float(x) for x in nums])
medians = {}
for (setup, wire), runs in rows.items():
    med = [statistics.median(col) for col in zip(*runs)]
    medians[(setup, wire)] = med
    print(f"{setup} {wire} {med[0]:.1f} {med[1]:.0f} {med[2]:.0f} {med[3]:.3f}")
if any(setup.startswith("base-") for setup, _ in medians):
    print("this build over the baseline (median samples/s, p50 and p99 ratios): setup wire "
          "throughput p50 p99")
    for setup in ("plain", "keys"):
        for wire in ("rest", "grpc", "rest-wrk"):
            new, old = medians.get((setup, wire)), medians.get(("base-" + setup, wire))
            if new and old:
                print(f"{setup} {wire} {new[0] / old[0]:.3f} {new[1] / old[1]:.3f} "
                      f"{new[2] / old[2]:.3f}")
PY
