#!/usr/bin/env bash
# scripts/cluster as a user runs it (docs/cluster.md, "Local cluster"): it
# prints where to send queries, both routers answer a query on the ports it
# promises (router i: REST N+10i, gRPC N+10i+1, metrics N+10i+2), its
# processes' command lines read `somm router`, `somm worker` and `somm
# controller`, and a stop leaves nothing running within 20 s. Twice: SIGTERM
# to the script, then Ctrl-C as a terminal sends it (SIGINT to the whole
# process group, every child included).
#
# Usage: tests/scripts_cluster_test.sh BUILD_DIR   (the folder of the somm binary; ctest passes it)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:?usage: scripts_cluster_test.sh BUILD_DIR}" && pwd)"
REPO="${SOMM_DEMO_REPO:-$ROOT/models/demo}"
cd "$ROOT"
TMP="$(mktemp -d -t somm-scripts-cluster.XXXXXX)"
SID=""
cleanup() {
  [[ -n "$SID" ]] && pkill -KILL -s "$SID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$TMP/out" ]] && tail -n 20 "$TMP/out" >&2; exit 1; }

# A base port whose every port the script uses is free, below Linux's
# ephemeral range (32768+) so that no test's picked port lands on one.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_base() {
  local base p ok
  for _ in $(seq 50); do
    base=$((12000 + (RANDOM % 180) * 100))
    ok=1
    for p in 0 1 2 10 11 12 100 101 110 111 200 201 210 211 300; do
      port_free $((base + p)) || { ok=0; break; }
    done
    ((ok)) && { echo "$base"; return 0; }
  done
  return 1
}

# A zombie (the script ended, not yet reaped) counts as gone.
alive() { local state; state="$(ps -p "$1" -o stat= 2>/dev/null)"; [[ -n "$state" && "$state" != Z* ]]; }

# The somm processes and redis-server of the script's session, one command
# line per row.
session_commands() { ps -s "$SID" -o args= 2>/dev/null | grep -E "somm (router|worker|controller)|redis-server" ; }

# run_once STOP: starts the cluster, checks it, stops it with STOP (term or
# ctrl-c) and checks that it is all gone within 20 s.
run_once() {
  local stop="$1" base started ready_s code cmds n metrics stop_start stopped_s
  base="$(pick_base)" || fail "no free base port"
  started=$SECONDS
  # env --default-signal: a script's background job starts with SIGINT
  # ignored, which bash then cannot trap; a terminal's foreground job has it.
  setsid env --default-signal=INT scripts/cluster --base-port "$base" --build-dir "$BUILD" --repo "$REPO" --logs "$TMP/logs-$stop" \
    >"$TMP/out" 2>&1 &
  SID=$!
  for _ in $(seq 1800); do
    grep -q "Ctrl-C stops the cluster" "$TMP/out" && break
    alive "$SID" || fail "scripts/cluster exited before it was ready"
    sleep 0.1
  done
  grep -q "Ctrl-C stops the cluster" "$TMP/out" || fail "scripts/cluster not ready in 180 s"
  ready_s=$((SECONDS - started))
  for i in 0 1; do
    grep -q "router $i: REST http://127.0.0.1:$((base + 10 * i))/v2  gRPC 127.0.0.1:$((base + 10 * i + 1))  metrics http://127.0.0.1:$((base + 10 * i + 2))/metrics" "$TMP/out" ||
      fail "router $i's ports are not printed as N+10i, N+10i+1, N+10i+2"
    code="$(curl -s -o "$TMP/answer" -w '%{http_code}' \
      "http://127.0.0.1:$((base + 10 * i))/v2/models/digits-mlp/infer" -d @"$REPO/.examples/digit_3.json")"
    [[ "$code" == 200 ]] || fail "router $i answered $code: $(head -c 300 "$TMP/answer")"
    grep -q '"outputs"' "$TMP/answer" || fail "router $i's answer has no outputs"
    # Read whole before grep: `grep -q` stops at the first match, and under
    # pipefail curl's write into the closed pipe would fail the pipeline.
    metrics="$(curl -sf "http://127.0.0.1:$((base + 10 * i + 2))/metrics")"
    grep -q '^somm_' <<<"$metrics" || fail "router $i's metrics port serves no somm metrics"
  done
  cmds="$(session_commands)"
  for role in "somm router" "somm worker" "somm controller"; do
    n="$(grep -c "$role " <<<"$cmds")"
    [[ "$n" == 2 ]] || fail "expected 2 processes whose command line reads '$role', found $n: $cmds"
  done
  grep -q redis-server <<<"$cmds" || fail "no redis-server in the script's session"

  stop_start=$EPOCHREALTIME
  if [[ "$stop" == term ]]; then kill -TERM "$SID"; else kill -INT -- "-$SID"; fi
  for _ in $(seq 250); do
    alive "$SID" || [[ -n "$(session_commands)" ]] || break
    sleep 0.1
  done
  stopped_s="$(awk -v a="$stop_start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')"
  alive "$SID" && fail "scripts/cluster still runs 25 s after $stop"
  [[ -z "$(session_commands)" ]] || fail "left running after $stop: $(session_commands)"
  awk -v s="$stopped_s" 'BEGIN {exit !(s <= 20)}' || fail "stopping took ${stopped_s} s (at most 20)"
  grep -q "scripts/cluster: stopped" "$TMP/out" || fail "no 'stopped' line after $stop"
  echo "[scripts/cluster] base port $base: ready after ${ready_s} s; both routers answered 200;" \
       "2 routers, 2 workers, 2 controllers and redis-server by command line;" \
       "$([[ $stop == term ]] && echo SIGTERM || echo Ctrl-C) stopped them all in ${stopped_s} s"
  wait "$SID" 2>/dev/null
  SID=""
}

run_once term
run_once ctrl-c
echo "PASS"
