# Shared by the bench scripts that start `somm serve` (compare.sh,
# managed.sh, isolation.sh, rss_cycles.sh). Source it after defining die();
# it installs the EXIT trap that kills every child the script started.

# Every child process goes into PIDS; kill_children stops them all on exit.
PIDS=()
kill_children() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PIDS=()
}
trap kill_children EXIT
trap 'exit 130' INT TERM

# stop_pid PID: stops one child (SIGTERM, SIGKILL after 10 s) and forgets it.
stop_pid() {
  local pid="$1" keep=() p
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for p in "${PIDS[@]}"; do [[ "$p" == "$pid" ]] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

alive_or_die() {  # pid name log
  kill -0 "$1" 2>/dev/null || { tail -n 20 "$3" >&2; die "$2 exited (log: $3)"; }
}

# start_somm_serve NAME BIN LOG_PREFIX [ARG...]: starts `BIN serve --http-port 0
# --grpc-port 0 --metrics-port 0 ARG...` in the background, with the
# variables in the SERVE_ENV array added to its environment, its output in
# LOG_PREFIX.stdout and LOG_PREFIX.stderr, and waits up to 120 s (every
# repository model loads and warms up first) for the first line it prints, the
# "somm: listening http=H grpc=G metrics=M" banner. Sets SERVED_PID,
# SERVED_BANNER, SERVED_HTTP_PORT, SERVED_GRPC_PORT, SERVED_METRICS_PORT and
# SERVED_READY_S (seconds from start to banner); NAME names it in errors.
start_somm_serve() {
  local name="$1" bin="$2" log="$3"; shift 3
  local t0=$EPOCHREALTIME
  env ${SERVE_ENV[@]+"${SERVE_ENV[@]}"} "$bin" serve --http-port 0 --grpc-port 0 \
    --metrics-port 0 "$@" >"$log.stdout" 2>"$log.stderr" &
  SERVED_PID=$!
  PIDS+=("$SERVED_PID")
  SERVED_BANNER=""
  for _ in $(seq 1200); do
    SERVED_BANNER="$(head -n 1 "$log.stdout" 2>/dev/null || true)"
    [[ "$SERVED_BANNER" == "somm: listening "* ]] && break
    alive_or_die "$SERVED_PID" "somm serve ($name)" "$log.stderr"
    sleep 0.1
  done
  [[ "$SERVED_BANNER" =~ http=([0-9]+)\ grpc=([0-9]+)\ metrics=([0-9]+) ]] ||
    die "somm serve ($name) printed no 'somm: listening' banner in 120 s (log: $log.stderr)"
  SERVED_HTTP_PORT="${BASH_REMATCH[1]}"
  SERVED_GRPC_PORT="${BASH_REMATCH[2]}"
  SERVED_METRICS_PORT="${BASH_REMATCH[3]}"
  SERVED_READY_S="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')"
}
