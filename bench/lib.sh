# Shared by the bench scripts that start `somm serve` or a cluster
# (compare.sh, managed.sh, isolation.sh, rss_cycles.sh, router_hop.sh,
# cluster_state_cost.sh, hostile_soak.sh, overload.sh, security_cost.sh,
# batch_job.sh). Source it after defining die();
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

# digits_repo DIR: a repository of digits-mlp alone (its model.yaml copied,
# its version linked from models/demo), for the benches of one small model.
digits_repo() {
  mkdir -p "$1/digits-mlp"
  cp models/demo/digits-mlp/model.yaml "$1/digits-mlp/"
  ln -s "$PWD/models/demo/digits-mlp/1" "$1/digits-mlp/1"
}

# wait_model_ready SCHEME://HOST:PORT MODEL: until the model answers ready.
wait_model_ready() {
  until curl -sfk "$1/v2/models/$2/ready" >/dev/null; do sleep 0.2; done
}

# CPU seconds (user + system, all threads) process PID has used so far.
cpu_s() {
  sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($12 + $13) / hz}'
}

# A TCP port free on loopback now.
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_banner NAME PID FILE REGEX: waits up to 120 s for a line of FILE (a
# process's stdout) that matches REGEX (bash ERE); its groups are left in
# BASH_REMATCH. Dies, with the process's stderr, if it exits first.
wait_banner() {
  local name="$1" pid="$2" file="$3" regex="$4" line
  for _ in $(seq 1200); do
    while IFS= read -r line; do
      [[ "$line" =~ $regex ]] && return 0
    done <"$file"
    alive_or_die "$pid" "$name" "${file%.stdout}.stderr"
    sleep 0.1
  done
  die "$name printed no line matching '$regex' in 120 s (log: $file)"
}

# start_somm_cluster BIN REPO LOG_DIR WORKERS ROUTERS [CONTROLLER_ARG...]: a
# cluster on loopback (docs/cluster.md) made of real processes: redis-server
# on a free port, one controller (`BIN controller ... CONTROLLER_ARG...`),
# WORKERS workers (worker-0, ...) and ROUTERS routers (router-0, ...), every
# port picked free, logs in LOG_DIR/<name>.stdout|stderr. Waits until every
# router's repository index lists a ready model. Sets CLUSTER_REDIS_PORT,
# CLUSTER_REDIS_PID, CLUSTER_CONTROLLER_PID and the arrays CLUSTER_WORKER_PIDS,
# CLUSTER_ROUTER_PIDS, CLUSTER_ROUTER_HTTP, CLUSTER_ROUTER_GRPC,
# CLUSTER_ROUTER_METRICS. Every process joins PIDS (killed on exit).
start_somm_cluster() {
  local bin="$1" repo="$2" logs="$3" workers="$4" routers="$5"; shift 5
  local redis j i pid
  mkdir -p "$logs"
  CLUSTER_REDIS_PORT="$(free_port)"
  redis="127.0.0.1:$CLUSTER_REDIS_PORT"
  redis-server --port "$CLUSTER_REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --loglevel warning >"$logs/redis.log" 2>&1 &
  CLUSTER_REDIS_PID=$!
  PIDS+=("$CLUSTER_REDIS_PID")
  for _ in $(seq 100); do
    redis-cli -p "$CLUSTER_REDIS_PORT" ping 2>/dev/null | grep -q PONG && break
    sleep 0.1
  done
  redis-cli -p "$CLUSTER_REDIS_PORT" ping 2>/dev/null | grep -q PONG ||
    die "redis-server did not answer on port $CLUSTER_REDIS_PORT (log: $logs/redis.log)"
  # --auto-variants false: profiling the repository's models in the
  # background would measure itself into the figures (as compare.sh's serve).
  "$bin" controller --model-repository "$repo" --redis "$redis" --controller-id controller-0 \
    --port 0 --metrics-port 0 --auto-variants false "$@" \
    >"$logs/controller-0.stdout" 2>"$logs/controller-0.stderr" &
  CLUSTER_CONTROLLER_PID=$!
  PIDS+=("$CLUSTER_CONTROLLER_PID")
  CLUSTER_WORKER_PIDS=()
  for ((j = 0; j < workers; ++j)); do
    # shellcheck disable=SC2086  # SOMM_WORKER_FLAGS: extra worker flags, word-split (A/B runs)
    "$bin" worker --model-repository "$repo" --redis "$redis" --worker-id "worker-$j" \
      --port 0 --metrics-port 0 ${SOMM_WORKER_FLAGS:-} >"$logs/worker-$j.stdout" 2>"$logs/worker-$j.stderr" &
    CLUSTER_WORKER_PIDS+=($!)
    PIDS+=($!)
  done
  CLUSTER_ROUTER_PIDS=() CLUSTER_ROUTER_HTTP=() CLUSTER_ROUTER_GRPC=() CLUSTER_ROUTER_METRICS=()
  for ((i = 0; i < routers; ++i)); do
    # shellcheck disable=SC2086  # SOMM_ROUTER_FLAGS: extra router flags, as above
    "$bin" router --model-repository "$repo" --redis "$redis" --router-id "router-$i" \
      --http-port 0 --grpc-port 0 --metrics-port 0 ${SOMM_ROUTER_FLAGS:-} \
      >"$logs/router-$i.stdout" 2>"$logs/router-$i.stderr" &
    CLUSTER_ROUTER_PIDS+=($!)
    PIDS+=($!)
  done
  wait_banner "somm controller" "$CLUSTER_CONTROLLER_PID" "$logs/controller-0.stdout" \
    'somm controller: listening'
  for ((j = 0; j < workers; ++j)); do
    wait_banner "somm worker $j" "${CLUSTER_WORKER_PIDS[$j]}" "$logs/worker-$j.stdout" \
      'somm worker: listening'
  done
  for ((i = 0; i < routers; ++i)); do
    pid="${CLUSTER_ROUTER_PIDS[$i]}"
    wait_banner "somm router $i" "$pid" "$logs/router-$i.stdout" \
      'http=([0-9]+) grpc=([0-9]+) metrics=([0-9]+)'
    CLUSTER_ROUTER_HTTP+=("${BASH_REMATCH[1]}")
    CLUSTER_ROUTER_GRPC+=("${BASH_REMATCH[2]}")
    CLUSTER_ROUTER_METRICS+=("${BASH_REMATCH[3]}")
  done
  # Ready once the leader has loaded the repository and each router sees it.
  for ((i = 0; i < routers; ++i)); do
    for _ in $(seq 600); do
      curl -sf -X POST "http://127.0.0.1:${CLUSTER_ROUTER_HTTP[$i]}/v2/repository/index" \
        -d '{"ready": true}' 2>/dev/null | grep -q READY && break
      alive_or_die "${CLUSTER_ROUTER_PIDS[$i]}" "somm router $i" "$logs/router-$i.stderr"
      sleep 0.2
    done
    curl -sf -X POST "http://127.0.0.1:${CLUSTER_ROUTER_HTTP[$i]}/v2/repository/index" \
      -d '{"ready": true}' 2>/dev/null | grep -q READY ||
      die "router $i lists no ready model after 120 s (logs: $logs)"
  done
}

# Writes a wrk script to FILE that POSTs the JSON file BODY and, at the end,
# prints one line: RESULT <requests/s> <p50 us> <p99 us> <failed> (failed:
# non-2xx answers plus connect, read, write and timeout errors).
wrk_post_script() {  # file body
  cat >"$1" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open("$2", "rb"))
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %d %d %d\n", summary.requests / (summary.duration / 1e6),
                         latency:percentile(50), latency:percentile(99),
                         summary.errors.status + summary.errors.connect + summary.errors.read
                         + summary.errors.write + summary.errors.timeout))
end
LUA
}
