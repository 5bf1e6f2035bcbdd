#!/usr/bin/env bash
# Memory over load/unload cycles (issue #5, "Also report"): does somm give
# back what a model took once the model is unloaded? The target is RSS growth
# under 5% from after the first cycle to after the last.
#
# It starts one `somm serve` on the demo repository (background variant
# generation off; the other demo models stay loaded and idle), then runs
# CYCLES cycles of: load MODEL, one query to it (so that the instance really
# executes), unload MODEL, all through the OIP REST API
# (POST /v2/repository/models/MODEL/load, /v2/models/MODEL/infer, .../unload)
# from one Python client.
# It reads somm's VmRSS from /proc/PID/status after the unload of cycle 1 and
# of every EVERY-th cycle (and, for comparison, while the model is loaded),
# and prints the table and the growth.
#
# Usage: bench/rss_cycles.sh [--model M] [--cycles N] [--every K] [--input F]
#          [--connection keepalive|per-call] [--prewarm N] [--out DIR]
#   --model    the model cycled (default digits-cnn)
#   --cycles   load/unload cycles (default 1000)
#   --every    read RSS every K cycles (default 100)
#   --input    the request body of the query (default: the demo example that
#              fits the model: .examples/digit_3.json or resnet_input.json)
#   --connection keepalive (default): every call on one HTTP connection;
#              per-call: a new connection per call, as curl in a loop does.
#              somm's REST server hands each connection to one of its 256
#              threads, so per-call connections wake the threads one by one,
#              and each keeps the stack pages and malloc arena it touched:
#              growth that stops once every thread has run, whatever the
#              model (docs/isolation.md has both figures)
#   --prewarm  before cycle 1, send this many queries to digits-mlp, each on a
#              new connection, so that the REST threads have all run once
#              (default 0)
#   --out      output folder (default bench/out/rss-<model>-<timestamp>)
# Environment: SOMM_BUILD_DIR (default build), SOMM_REPO (default models/demo),
# SOMM_ENV="VAR=value ..." (extra environment of somm serve, e.g.
# SOMM_ENV="MALLOC_ARENA_MAX=2").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD_DIR="${SOMM_BUILD_DIR:-build}"
REPO="${SOMM_REPO:-models/demo}"
MODEL=digits-cnn
CYCLES=1000
EVERY=100
INPUT=""
CONNECTION=keepalive
PREWARM=0
OUT=""
while (($#)); do
  case "$1" in
    --model) MODEL="${2:?}"; shift 2 ;;
    --cycles) CYCLES="${2:?}"; shift 2 ;;
    --every) EVERY="${2:?}"; shift 2 ;;
    --input) INPUT="${2:?}"; shift 2 ;;
    --connection) CONNECTION="${2:?}"; shift 2 ;;
    --prewarm) PREWARM="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/rss_cycles.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "bench/rss_cycles.sh: $*" >&2; exit 1; }

SOMM="$BUILD_DIR/somm"
[[ -x "$SOMM" ]] || die "no $SOMM (build it, or set SOMM_BUILD_DIR)"
[[ -f "$REPO/$MODEL/model.yaml" ]] || die "no model '$MODEL' in $REPO"
if [[ -z "$INPUT" ]]; then
  case "$MODEL" in
    digits-*) INPUT="$REPO/.examples/digit_3.json" ;;
    *) INPUT="$REPO/.examples/resnet_input.json" ;;
  esac
fi
[[ -f "$INPUT" ]] || die "no request body $INPUT (give --input)"
[[ "$CONNECTION" == keepalive || "$CONNECTION" == per-call ]] ||
  die "--connection is keepalive or per-call"
OUT="${OUT:-bench/out/rss-$MODEL-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"

# Children are killed on exit (bench/lib.sh: PIDS, start_somm_serve).
source "$ROOT/bench/lib.sh"

read -r -a SERVE_ENV <<<"${SOMM_ENV:-}"
# --managed false: the controller would unload the idle demo models after
# 30 s, and their memory leaving would hide any growth from the cycles.
start_somm_serve somm "$SOMM" "$OUT/somm" --model-repository "$REPO" --auto-variants false \
  --managed false --model-control-mode explicit --load-model '*'
SOMM_PID="$SERVED_PID"; BANNER="$SERVED_BANNER"
URL="http://127.0.0.1:$SERVED_HTTP_PORT"

echo "somm serve pid $SOMM_PID ($BANNER); cycling $MODEL $CYCLES times," \
  "$CONNECTION connections${SOMM_ENV:+ (env: $SOMM_ENV)}"
/usr/bin/python3 - "$URL" "$MODEL" "$INPUT" "$CYCLES" "$EVERY" "$CONNECTION" "$SOMM_PID" \
  "$OUT/rss.txt" "$PREWARM" "$REPO/.examples/digit_3.json" <<'PY' ||
import http.client, sys, time
url, model, body_path, cycles, every, connection, pid, out, prewarm, digit = sys.argv[1:]
cycles, every, prewarm = int(cycles), int(every), int(prewarm)
host, port = url.split("//")[1].rsplit(":", 1)
body = open(body_path, "rb").read()
conn = None

def rss_kb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def post(path, data=b"{}"):
    global conn
    if conn is None or connection == "per-call":
        if conn is not None:
            conn.close()
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"POST {path}: HTTP {r.status}")

print(f"at start: RSS {rss_kb()} kB (every model loaded)")
if prewarm:
    query = open(digit, "rb").read()
    for _ in range(prewarm):
        c = http.client.HTTPConnection(host, int(port), timeout=600)
        c.request("POST", "/v2/models/digits-mlp/infer", body=query)
        c.getresponse().read()
        c.close()
    print(f"after {prewarm} digits-mlp queries on new connections: RSS {rss_kb()} kB")
post(f"/v2/repository/models/{model}/unload")
print(f"after unloading {model}: RSS {rss_kb()} kB")
start = time.monotonic()
with open(out, "w") as f:
    f.write("cycle rss_unloaded_kb rss_loaded_kb seconds\n")
    for c in range(1, cycles + 1):
        post(f"/v2/repository/models/{model}/load")
        post(f"/v2/models/{model}/infer", body)
        probe = c == 1 or c % every == 0 or c == cycles
        loaded = rss_kb() if probe else 0
        post(f"/v2/repository/models/{model}/unload")
        if probe:
            line = f"{c} {rss_kb()} {loaded} {time.monotonic() - start:.0f}"
            f.write(line + "\n")
            f.flush()
            print(line, flush=True)
PY
  die "a call failed (see $OUT/somm.stderr)"
kill -0 "$SOMM_PID" 2>/dev/null || die "somm serve exited (see $OUT/somm.stderr)"

/usr/bin/python3 - "$OUT/rss.txt" "$MODEL" <<'EOF' | tee "$OUT/summary.txt"
import sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
rows = [(int(c), int(u), int(l), int(s)) for c, u, l, s in rows]
print()
print(f"{sys.argv[2]}: VmRSS of somm serve after each cycle's unload (and while loaded)")
print("  cycle   unloaded MiB   loaded MiB   vs cycle 1   elapsed s")
first = rows[0][1]
for c, u, l, s in rows:
    print(f"  {c:>5}   {u / 1024:>12.1f}   {l / 1024:>10.1f}   {100 * (u - first) / first:>+9.1f}%   {s:>9}")
last = rows[-1]
growth = 100 * (last[1] - first) / first
print(f"growth after cycle {last[0]} vs after cycle 1: {growth:+.1f}% "
      f"({(last[1] - first) / 1024:+.1f} MiB; target < 5%: {'met' if growth < 5 else 'missed'})")
EOF
echo "output: $OUT"
