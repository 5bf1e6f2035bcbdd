#!/usr/bin/env bash
# bench_grpc_load against a real `somm serve` (digits-mlp alone): a 1-s
# window at concurrency 4 answers every call, and its JSON holds what
# bench/wire.sh reads (q/s, p50 <= p99 <= max, the client's and the server's
# CPU per request, the answer's size); a call for a model that does not exist
# makes it exit 1 with the calls counted as errors, a body it cannot use
# (too few values, a name of the wrong type) exit 2.
#
# Usage: bench/grpc_load_test.sh BUILD_DIR   (the folder of somm and
# bench_grpc_load; ctest passes it)
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "FAIL: $*" >&2; exit 1; }
source bench/lib.sh
build="$(cd "${1:?usage: grpc_load_test.sh BUILD_DIR}" && pwd)"
[[ -f models/demo/digits-mlp/model.yaml ]] || die "no models/demo (scripts/setup makes it)"
tmp="$(mktemp -d -t somm-grpc-load.XXXXXX)"
trap 'kill_children; rm -rf "$tmp"' EXIT
digits_repo "$tmp/repo"
start_somm_serve grpc-load "$build/somm" "$tmp/somm" --model-repository "$tmp/repo" \
  --auto-variants false
target="127.0.0.1:$SERVED_GRPC_PORT" body=models/demo/.examples/digit_3.json

"$build/bench_grpc_load" --target "$target" --model digits-mlp --input "$body" --concurrency 4 \
  --warmup-s 0.2 --duration-s 1 --server-pid "$SERVED_PID" >"$tmp/ok.json" ||
  die "bench_grpc_load exited $? against a serving somm"
/usr/bin/python3 - "$tmp/ok.json" <<'PY' || die "its JSON: $(cat "$tmp/ok.json")"
import json, sys
r = json.load(open(sys.argv[1]))
checks = {
    "window of about 1 s": 0.9 <= r["window_s"] <= 5,
    "calls answered": r["requests"] > 0 and r["errors"] == 0,
    "q/s = requests / window": abs(r["qps"] - r["requests"] / r["window_s"]) <= 0.01 * r["qps"],
    "0 < p50 <= p99 <= max": 0 < r["p50_us"] <= r["p99_us"] <= r["max_us"],
    "client CPU per request": r["client_cpu_us_per_request"] > 0,
    "server CPU per request": r["server_cpu_us_per_request"] is not None
                              and r["server_cpu_us_per_request"] > 0,
    "answer bytes": r["response_bytes"] > 0 and r["request_bytes"] > 64 * 4,
    "concurrency": r["concurrency"] == 4,
}
failed = [name for name, ok in checks.items() if not ok]
if failed:
    sys.exit("failed: " + ", ".join(failed))
PY

rc=0
"$build/bench_grpc_load" --target "$target" --model no-such-model --input "$body" \
  --warmup-s 0 --duration-s 0.3 >"$tmp/missing.json" 2>"$tmp/missing.err" || rc=$?
[[ "$rc" == 1 ]] || die "an unknown model: exit $rc, want 1"
/usr/bin/python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(r["requests"] != 0 or r["errors"] == 0)' \
  "$tmp/missing.json" || die "an unknown model: $(cat "$tmp/missing.json")"
grep -q "calls failed" "$tmp/missing.err" || die "an unknown model: no error on stderr"

echo '{"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32", "data": [1, 2]}]}' \
  >"$tmp/short.json"
rc=0
"$build/bench_grpc_load" --target "$target" --model digits-mlp --input "$tmp/short.json" \
  --duration-s 0.3 >/dev/null 2>"$tmp/short.err" || rc=$?
[[ "$rc" == 2 ]] || die "2 values for a shape of 64: exit $rc, want 2"
echo '{"inputs": [{"name": 7, "shape": [1, -64], "datatype": "FP32", "data": [1]}]}' >"$tmp/bad.json"
rc=0
"$build/bench_grpc_load" --target "$target" --model digits-mlp --input "$tmp/bad.json" \
  --duration-s 0.3 >/dev/null 2>"$tmp/bad.err" || rc=$?
[[ "$rc" == 2 ]] || die "a name that is not a string: exit $rc, want 2"
echo "bench_grpc_load_test: ok ($(cat "$tmp/ok.json"))"
