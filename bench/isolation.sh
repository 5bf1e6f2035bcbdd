#!/usr/bin/env bash
# Isolation: does loading and unloading one model disturb another busy model?
# (issue #5 point 4; the target is the busy model's p99 with churn at most
# 1.2x its p99 without; TF Serving issue #1866 is the failure it guards
# against.)
#
# It starts one `somm serve` on the demo repository (background variant
# generation off), unloads the churn models, then measures the busy model
# under a steady open-loop load (`somm bench --request-rate`, Poisson) in
# alternating windows of two kinds:
#   baseline  no repository activity
#   churn     another process loads and unloads the churn models in turn
#             through the OIP repository extension
#             (POST /v2/repository/models/M/load, .../unload), back to back
# ROUNDS rounds of (baseline, churn), each window a separate `somm bench`
# run. It prints each window (with the CPU that somm and, from /proc/stat,
# everything else on the machine used meanwhile) and the medians over the
# rounds: p50, p99, the ratio churn/baseline of the medians and the median of
# the per-round ratios, over all rounds and over the quiet ones (other work
# under 0.25 cores in both windows: the machine is shared); everything is
# kept under --out.
#
# Usage: bench/isolation.sh [--busy MODEL] [--churn "M1 M2"] [--rate R]
#          [--rounds N] [--window-s S] [--pause-s P] [--external] [-i http|grpc]
#          [--out DIR]
#   --busy      the busy model (default digits-cnn)
#   --churn     the models loaded and unloaded (default "resnet18 mobilenet_v3_small")
#   --rate      the busy model's Poisson rate, queries/s (default 400)
#   --rounds    (baseline, churn) pairs (default 12)
#   --window-s  measured seconds per window, after 1 s of warm-up (default 5)
#   --pause-s   the churn client's pause after each load or unload call
#               (default 0: back to back, the worst case; the churn then keeps
#               one core busy)
#   --external  the control: churn a second somm process instead (same
#               machine, same binary; it serves nothing else), to tell the
#               machine's share of the interference from somm's
#   -i          protocol of the busy load (default http)
#   --out       output folder (default bench/out/isolation-<timestamp>)
# Environment: SOMM_BUILD_DIR=<dir> (default build), SOMM_REPO=<dir> (default
# models/demo), SOMM_ENV="VAR=value ..." (extra environment of somm serve,
# e.g. SOMM_ENV="OMP_WAIT_POLICY=ACTIVE" to measure without somm's default),
# SOMM_SERVE_ARGS="..." (extra arguments of somm serve, e.g. "--managed false").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD_DIR="${SOMM_BUILD_DIR:-build}"
REPO="${SOMM_REPO:-models/demo}"
BUSY=digits-cnn
CHURN="resnet18 mobilenet_v3_small"
RATE=400
ROUNDS=12
WINDOW_S=5
PROTO=http
PAUSE_S=0
EXTERNAL=0
OUT=""
while (($#)); do
  case "$1" in
    --busy) BUSY="${2:?}"; shift 2 ;;
    --churn) CHURN="${2:?}"; shift 2 ;;
    --rate) RATE="${2:?}"; shift 2 ;;
    --rounds) ROUNDS="${2:?}"; shift 2 ;;
    --window-s) WINDOW_S="${2:?}"; shift 2 ;;
    --pause-s) PAUSE_S="${2:?}"; shift 2 ;;
    --external) EXTERNAL=1; shift ;;
    -i) PROTO="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/isolation.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "bench/isolation.sh: $*" >&2; exit 1; }

SOMM="$BUILD_DIR/somm"
[[ -x "$SOMM" ]] || die "no $SOMM (build it, or set SOMM_BUILD_DIR)"
for m in "$BUSY" $CHURN; do
  [[ -f "$REPO/$m/model.yaml" ]] || die "no model '$m' in $REPO (scripts/setup makes models/demo)"
done
OUT="${OUT:-bench/out/isolation-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"

# Children are killed on exit (bench/lib.sh: PIDS, start_somm_serve).
source "$ROOT/bench/lib.sh"

# start_somm NAME: one `somm serve` on free ports; sets SERVED_PID and SERVED_HTTP/_GRPC.
read -r -a SERVE_ENV <<<"${SOMM_ENV:-}"
read -r -a SERVE_ARGS <<<"${SOMM_SERVE_ARGS:-}"
start_somm() {
  # Explicit model control: the churn loads and unloads through the
  # repository API, which the default mode (none) refuses.
  start_somm_serve "$1" "$SOMM" "$OUT/$1" --model-repository "$REPO" --auto-variants false \
    --model-control-mode explicit --load-model '*' ${SERVE_ARGS[@]+"${SERVE_ARGS[@]}"}
  SERVED_HTTP="127.0.0.1:$SERVED_HTTP_PORT"
  SERVED_GRPC="127.0.0.1:$SERVED_GRPC_PORT"
  echo "$1: pid $SERVED_PID, $SERVED_BANNER"
}
repo_call() {  # URL ACTION MODEL: POST the repository extension, fail loudly
  curl -sf -X POST "http://$1/v2/repository/models/$3/$2" -d '{}' >/dev/null ||
    die "$2 of $3 at $1 failed"
}

start_somm somm
SOMM_PID="$SERVED_PID"; HTTP="$SERVED_HTTP"; GRPC="$SERVED_GRPC"
BUSY_URL="$HTTP"; [[ "$PROTO" == grpc ]] && BUSY_URL="$GRPC"
echo "wait policy in somm: $(tr '\0' '\n' <"/proc/$SOMM_PID/environ" | grep '^OMP_WAIT_POLICY=' || echo 'OMP_WAIT_POLICY unset')" |
  tee "$OUT/env.txt"
for m in $CHURN; do repo_call "$HTTP" unload "$m"; done
CHURN_URL="$HTTP"
if ((EXTERNAL)); then
  # The control: the same churn in a second somm process that serves nothing
  # else. What it does to the busy model is the machine's share (caches,
  # memory bandwidth, the other core), not somm's.
  start_somm somm-external
  EXTERNAL_PID="$SERVED_PID"
  for m in $(ls "$REPO"); do
    [[ -f "$REPO/$m/model.yaml" ]] && curl -s -o /dev/null -X POST \
      "http://$SERVED_HTTP/v2/repository/models/$m/unload" -d '{}'
  done
  CHURN_URL="$SERVED_HTTP"
fi

# churn_loop LOG: loads and unloads the churn models in turn until killed;
# one line per call: model action milliseconds http-status. One Python
# process on one keep-alive connection, so that the client's own CPU (a curl
# start per call costs more than the call) does not count as interference.
churn_loop() {
  exec /usr/bin/python3 - "$1" "$CHURN_URL" "$PAUSE_S" $CHURN <<'PY'
import http.client, sys, time
log, hostport, pause, models = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
host, port = hostport.rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port), timeout=600)
with open(log, "a", buffering=1) as out:
    while True:
        for m in models:
            for action in ("load", "unload"):
                t0 = time.monotonic()
                try:
                    conn.request("POST", f"/v2/repository/models/{m}/{action}", body=b"{}",
                                 headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    r.read()
                    code = r.status
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=600)
                    code = 0
                out.write(f"{m} {action} {(time.monotonic() - t0) * 1000:.0f} {code}\n")
                time.sleep(pause)
PY
}


measure() {  # FILE: one window of the busy model; FILE.loadgen_cpu gets its CPU seconds
  /usr/bin/time -o "$1.time" -f '%U %S' "$SOMM" bench "$BUSY" --url "$BUSY_URL" -i "$PROTO" \
    --request-rate "$RATE" --warmup-s 1 --duration-s "$WINDOW_S" --window-s "$WINDOW_S" \
    --label "$(basename "$1")" --json "$1.json" >"$1.log" 2>&1 ||
    { tail -n 5 "$1.log" >&2; die "somm bench failed ($1.log)"; }
  awk '{printf "%.2f\n", $1 + $2}' "$1.time" >"$1.loadgen_cpu"
}

cpu_s() {  # CPU seconds (user + system, all threads) of a process so far
  sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($12 + $13) / hz}'
}
machine_busy_s() {  # CPU seconds the whole machine has been busy so far
  awk -v hz="$(getconf CLK_TCK)" '/^cpu / {printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / hz}' /proc/stat
}

echo "busy model $BUSY over $PROTO at $RATE queries/s (Poisson); churn: $CHURN" \
  "(pause ${PAUSE_S} s after each call); $ROUNDS rounds of ${WINDOW_S} s windows (+1 s warm-up each)"
for r in $(seq "$ROUNDS"); do
  for kind in baseline churn; do
    file="$OUT/$kind-$r"
    s0="$(cpu_s "$SOMM_PID")"; b0="$(machine_busy_s)"; t0=$EPOCHREALTIME; churn_cpu=0
    x0=0; ((EXTERNAL)) && x0="$(cpu_s "$EXTERNAL_PID")"
    if [[ "$kind" == churn ]]; then
      : >"$file.churn"
      churn_loop "$file.churn" &
      CHURN_PID=$!
      PIDS+=("$CHURN_PID")
      measure "$file"
      churn_cpu="$(cpu_s "$CHURN_PID")"
      # With --external, the second somm's CPU is the churn's too.
      ((EXTERNAL)) && churn_cpu="$(awk -v a="$churn_cpu" -v x0="$x0" -v x1="$(cpu_s "$EXTERNAL_PID")" \
        'BEGIN {printf "%.2f", a + x1 - x0}')"
      kill "$CHURN_PID" 2>/dev/null || true
      wait "$CHURN_PID" 2>/dev/null || true
      # Leave the churn models unloaded for the next baseline.
      for m in $CHURN; do
        curl -s -o /dev/null -X POST "http://$CHURN_URL/v2/repository/models/$m/unload" -d '{}' || true
      done
    else
      measure "$file"
    fi
    # Cores' worth of CPU over the window: somm, the load generator, the churn
    # client, and everything else on the (shared) machine.
    awk -v s0="$s0" -v s1="$(cpu_s "$SOMM_PID")" -v b0="$b0" -v b1="$(machine_busy_s)" \
        -v t0="$t0" -v t1="$EPOCHREALTIME" -v lg="$(cat "$file.loadgen_cpu")" -v ch="$churn_cpu" 'BEGIN {
      w = t1 - t0; other = (b1 - b0) - (s1 - s0) - lg - ch; if (other < 0) other = 0
      printf "{\"somm_cores\": %.2f, \"loadgen_cores\": %.2f, \"churn_client_cores\": %.2f, \"other_cores\": %.2f}\n",
             (s1 - s0) / w, lg / w, ch / w, other / w
    }' >"$file.cpu.json"
    /usr/bin/python3 - "$file" <<'PY'
import json, os, sys
f = sys.argv[1]
p = json.load(open(f + ".json"))["points"][0]
cpu = json.load(open(f + ".cpu.json"))
lat = p["latency_us"]
loads = ""
if os.path.exists(f + ".churn"):
    rows = [l.split() for l in open(f + ".churn") if len(l.split()) == 4]
    ok = sorted(int(r[2]) for r in rows if r[1] == "load" and r[3] == "200")
    bad = sum(1 for r in rows if r[3] != "200")
    loads = f"  loads {len(ok)} (median {ok[len(ok) // 2] if ok else 0} ms)" + \
        (f", {bad} failed calls" if bad else "")
errs = sum((p.get("errors") or {}).values())
print(f"  {os.path.basename(f):<12} {p['throughput_qps']:>7.1f} q/s  p50 {lat['p50'] / 1000:6.2f} ms"
      f"  p99 {lat['p99'] / 1000:7.2f} ms  somm {cpu['somm_cores']:.2f} cores, other "
      f"{cpu['other_cores']:.2f}{loads}{f'  {errs} errors' if errs else ''}")
PY
  done
done
kill -0 "$SOMM_PID" 2>/dev/null || die "somm serve exited during the run (see $OUT/somm.stderr)"
grep -E '^Vm(RSS|HWM)' "/proc/$SOMM_PID/status" >"$OUT/somm.memory"

/usr/bin/python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/summary.txt"
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
QUIET = 0.25  # other work below this many cores in both windows of a round

def window(kind, r):
    f = os.path.join(out, f"{kind}-{r}")
    p = json.load(open(f + ".json"))["points"][0]
    p["cpu"] = json.load(open(f + ".cpu.json"))
    return p

pairs_all = [(window("baseline", r), window("churn", r)) for r in range(1, rounds + 1)]
loads = 0
for r in range(1, rounds + 1):
    for line in open(os.path.join(out, f"churn-{r}.churn")):
        parts = line.split()
        loads += len(parts) == 4 and parts[1] == "load" and parts[3] == "200"

def block(title, pairs):
    if not pairs:
        print(f"{title}: none\n")
        return
    med = lambda ps, k: statistics.median(p["latency_us"][k] for p in ps) / 1000
    base, churn = [b for b, _ in pairs], [c for _, c in pairs]
    print(f"{title}: {len(pairs)} rounds")
    print(f"                           p50 ms    p99 ms")
    print(f"  baseline (median)       {med(base, 'p50'):7.2f}   {med(base, 'p99'):7.2f}")
    print(f"  churn (median)          {med(churn, 'p50'):7.2f}   {med(churn, 'p99'):7.2f}")
    r50 = med(churn, "p50") / med(base, "p50")
    r99 = med(churn, "p99") / med(base, "p99")
    print(f"  ratio of the medians    {r50:7.2f}x  {r99:7.2f}x   (target: p99 ratio <= 1.20: "
          f"{'met' if r99 <= 1.2 else 'missed'})")
    per = sorted(c["latency_us"]["p99"] / b["latency_us"]["p99"] for b, c in pairs)
    print(f"  p99 ratio per round     median {statistics.median(per):.2f}x: "
          f"{', '.join(f'{x:.2f}' for x in per)} (sorted)")
    added = statistics.median(c["cpu"]["somm_cores"] - b["cpu"]["somm_cores"] for b, c in pairs)
    print(f"  somm CPU added by churn {added:.2f} cores (median over rounds)\n")

print()
block("all rounds", pairs_all)
block(f"quiet rounds (other work < {QUIET} cores in both windows)",
      [(b, c) for b, c in pairs_all
       if max(b["cpu"]["other_cores"], c["cpu"]["other_cores"]) < QUIET])
print(f"successful loads: {loads} in {rounds} churn windows")
PY
echo "output: $OUT"
