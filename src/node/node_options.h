// The options of the processes a node assembles (serve_node.h,
// worker_node.h, router_node.h, controller_node.h), and the flag groups
// they share. apps/somm_main.cc parses the flags into these structs
// (CLI11); plain values. What a flag group says of a component's options
// is turned into them in one place (node/component_options.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "batching/batch_types.h"
#include "crypto/tls_files.h"

namespace somm {

// Where offline batch jobs may read and write (batch/batch_paths.h).
struct BatchRootFlags {
  // --batch-root: the per-tenant folders' parent; "" = <state dir>/batch-files.
  std::string root;
  // --batch-admin-root (repeatable): more roots admin keys may use as they are.
  std::vector<std::string> admin_roots;
};

// The REST port's limits on slow and numerous clients
// (transport/http/http_server.h): --header-timeout-s, --body-timeout-s,
// --max-connections-per-address.
struct ConnectionLimitFlags {
  int header_timeout_s = 10;
  int body_timeout_s = 30;
  int64_t max_connections_per_address = 1024;  // 0 = no cap
};

// Where registrations run the model's code (sandbox/process_sandbox.h): a
// confined child with these limits. --registration-cpu-s,
// --registration-timeout-s, --registration-memory-mb (the probe's, and the
// memory of variant jobs too), --variants-cpu-s, --variants-timeout-s.
struct RegistrationLimitFlags {
  double cpu_s = 60;
  double timeout_s = 120;
  int64_t memory_mb = 4096;
  double variants_cpu_s = 3600;
  double variants_timeout_s = 3600;
};

// What the flags say of a router's policies (RouterOptions, built by
// BuildRouterOptions): `somm serve`'s and `somm router`'s --explain and
// --routing-policy, and `somm router`'s --zone and --cross-zone-rtt-ms (a
// served repository has one local worker and no zones).
struct RouterFlags {
  // --explain: "compact" (one `somm` parameter with every fact) or "full"
  // (one parameter per fact); RouterOptions::compact_explanation. Compact by
  // default: the full form's 13-14 parameters cost 2-5 us of every answer
  // (docs/selection.md), and a query may still ask for it (somm_explain).
  std::string explain = "compact";
  // --routing-policy: where among a variant's holders a query goes
  // (router/routing_policy.h): p2c or least-wait.
  std::string routing_policy = "p2c";
  // --zone: it prefers workers of the same zone (RouterOptions::zone).
  std::string zone;
  double cross_zone_rtt_ms = 1.0;  // RouterOptions::cross_zone_rtt_ms
};

// What the flags say of a controller's loop (ControllerOptions, built by
// BuildControllerOptions): `somm serve`'s and `somm controller`'s
// --control-tick-ms and --idle-unload-s.
struct ControlLoopFlags {
  int tick_ms = 1000;        // raised to 10 at least
  double idle_unload_s = 0;  // 0 = the autoscaler's default
};

// `somm serve`: somm in one process (serve_node.h).
struct ServeOptions {
  std::string model_repository;
  // Loopback unless asked: beyond it, --auth keys is required.
  std::string address = "127.0.0.1";
  // "keys": every call but the health probes needs an API key
  // (docs/security.md); "none": no checks, loopback only.
  std::string auth = "none";
  std::string keys_file;  // "" = <repo>/.somm/keys (e.g. a mounted Secret)
  int http_port = 8000;     // 0 = pick a free port and print it
  int grpc_port = 8001;
  int metrics_port = 8002;
  int64_t max_body_bytes = 64 << 20;  // REST bodies and gRPC messages
  // REST I/O threads: each an epoll loop over its share of the connections
  // (transport/http/http_server.h); requests are decoded on them. 0 = half the
  // cores, 1 to 4.
  int http_threads = 0;
  // Inference requests (REST and gRPC together) admitted at once; more are
  // refused with 429 / RESOURCE_EXHAUSTED before their body is decoded
  // (serving/inflight_limit.h). 0 = no bound. 64 (one full batch of the demo
  // models queued behind one running) drains within a 20 ms SLO on two
  // cores; 256 did not, and its queued queries expired after being decoded
  // (docs/hostile-input.md, "Overload").
  int64_t max_inflight = 64;
  // Bytes of REST bodies, gRPC messages and decoded tensors held at once
  // (serving/byte_budget.h); more get 429 / RESOURCE_EXHAUSTED before they
  // are read. -1 = a quarter of the memory budget (InflightBytesBudget); 0 =
  // no bound.
  int64_t max_inflight_bytes = -1;
  std::string device = "auto";        // "auto" (GPU if present), "cpu" or "cuda:N"
  std::string log_level = "info";
  std::string log_format = "text";  // --log-format text|json (node/log_format.h)
  // --exit-timeout-secs (Triton's): how long a stop waits for calls in
  // flight before it cancels them.
  double exit_timeout_secs = 30;
  // Generate and profile variants for repository models that have none.
  bool auto_variants = true;
  // The managed runtime (docs/managed.md): autoscaling, eviction, on-demand
  // loads, for the router and the controller alike. false = static
  // provisioning (the configured instances only).
  bool managed = true;
  RouterFlags routing;      // --explain, --routing-policy
  ControlLoopFlags control;  // --control-tick-ms, --idle-unload-s
  // --model-control-mode none|poll|explicit, --repository-poll-secs,
  // --load-model (Triton's names and rules): none loads every model at
  // start; poll also watches the repository (repository/repository_poller.h);
  // explicit loads only the --load-model names ("*": all) and is the one
  // mode in which the repository API's load and unload are allowed.
  std::string model_control_mode = "none";
  std::vector<std::string> load_models;
  double repository_poll_secs = 5;
  double memory_budget_mb = 0;    // 0 = a fraction of the memory available at start
  // Share of wall time that background loads and unloads may take when they
  // come back to back (common/duty_cycle_pacer.h; docs/isolation.md).
  double background_duty = 0.15;
  // As a worker's (WorkerProcessOptions below): an idle one-thread instance
  // runs a query predicted to take at most inline_max_compute_us on the
  // REST or gRPC thread that received it, while its queries come at least
  // inline_min_gap_us apart on average. Off by default: on one quiet
  // machine, digits-mlp at concurrency 1, 250 took gRPC from 5,212 to 7,380
  // queries/s but REST JSON from 9,839 to 8,580 (bench/ab_c1.sh;
  // docs/history/performance.md).
  double inline_max_compute_us = 0;
  double inline_min_gap_us = kDefaultInlineMinGapUs;
  // TLS on the REST, gRPC and metrics ports (--tls-cert, --tls-key;
  // --tls-client-ca for mutual TLS); not enabled = plaintext.
  crypto::TlsServerFiles tls;
  BatchRootFlags batch;
  ConnectionLimitFlags connections;
  RegistrationLimitFlags registration;
  // --cors-origin (repeatable): browser origins allowed to call the REST
  // port cross-origin (transport/http/origin_policy.h); none = CORS off.
  std::vector<std::string> cors_origins;
  // --strict-readiness (Triton's): ready once every model is available and
  // its configured instances loaded; false = once the server is up.
  bool strict_readiness = true;
  // --check-args: check the flags as a start would, print "ok", and stop.
  bool check_args = false;
};

// The cluster's processes (docs/cluster.md): they share state through one
// Redis and read models from one shared repository.
struct WorkerProcessOptions {
  std::string model_repository;
  std::string redis = "127.0.0.1:6379";
  std::string address = "127.0.0.1";  // where the worker service listens
  int port = 8101;                    // 0 = pick a free one and print it
  std::string advertise;              // what routers dial; "" = address:port
  int metrics_port = 8102;            // /metrics and the health probes
  std::string worker_id;              // "" = hostname-port
  std::string zone;
  std::string device = "auto";
  double memory_budget_mb = 0;
  // An idle one-thread instance runs a query predicted to take at most this
  // long on the RPC thread that received it, skipping the hand-off to its
  // batcher thread and back (Batcher::RunInlineIfIdle). 0 = never.
  double inline_max_compute_us = 250;
  // ... while its queries come at least this many microseconds apart on
  // average (closer is load, which its batcher thread takes so that queries
  // batch).
  double inline_min_gap_us = kDefaultInlineMinGapUs;
  int lease_ms = 3000;                // its report's TTL in Redis
  int heartbeat_ms = 1000;            // how often it renews it
  double background_duty = 0.15;
  std::string log_level = "info";
  std::string log_format = "text";  // --log-format text|json (node/log_format.h)
  // --exit-timeout-secs (Triton's): how long a stop waits for calls in
  // flight before it cancels them.
  double exit_timeout_secs = 30;
  // Its service port's TLS, mutual with a client CA, and the same files are
  // its client side toward the other processes. Its metrics port takes the
  // certificate and asks for no client one (probes present none).
  crypto::TlsServerFiles tls;
  // --keys-file: /metrics needs a metrics or admin key from it; required
  // beyond loopback (as is mutual TLS).
  std::string keys_file;
  // --check-args: check the flags as a start would, print "ok", and stop.
  bool check_args = false;
};

struct RouterProcessOptions {
  // Optional: a router serves what the cluster's catalog publishes.
  std::string model_repository;
  // Its audit log, quota file (tenants.yaml), default key file and batch
  // jobs; "" = <repo>/.somm, or $HOME/.somm without a repository.
  std::string state_dir;
  std::string redis = "127.0.0.1:6379";
  std::string address = "127.0.0.1";
  std::string auth = "none";  // as ServeOptions::auth
  std::string keys_file;      // as ServeOptions::keys_file
  int http_port = 8000;
  int grpc_port = 8001;
  int metrics_port = 8002;
  std::string router_id;  // "" = hostname-port
  std::string device = "auto";  // where configured instances run (as the controller's)
  int64_t max_body_bytes = 64 << 20;
  int http_threads = 0;
  // Threads on the one gRPC completion queue that serves the router's gRPC
  // frontend and takes its workers' answers; 0 = half the cores, 2 to 4.
  // Those past the first wait on gRPC only while calls overlap
  // (docs/history/router-hop.md, "One thread waits on gRPC at a time").
  int grpc_threads = 0;
  // Inference requests admitted at once (serving/inflight_limit.h); 0 = no
  // bound, the default: a router's capacity is its workers', which shed by
  // their queues' SLO admission.
  int64_t max_inflight = 0;
  int64_t max_inflight_bytes = -1;  // as ServeOptions::max_inflight_bytes
  // As the controller's --managed: false = static provisioning, so the
  // selector picks only loaded variants (RouterOptions::managed).
  bool managed = true;
  // --model-control-mode: the repository API's load and unload pass only
  // under explicit, as on `somm serve`; which models load at start and
  // whether the repository is polled are the leader controller's flags.
  std::string model_control_mode = "none";
  // --explain and --routing-policy as somm serve's; --zone, --cross-zone-rtt-ms.
  RouterFlags routing;
  std::string log_level = "info";
  std::string log_format = "text";  // --log-format text|json (node/log_format.h)
  // --exit-timeout-secs (Triton's): how long a stop waits for calls in
  // flight before it cancels them.
  double exit_timeout_secs = 30;
  // TLS on its REST, gRPC and metrics ports; with a client CA, mutual TLS,
  // and it dials workers and the controller with the same certificate
  // unless cluster_tls names another.
  crypto::TlsServerFiles tls;
  // --cluster-tls-cert, --cluster-tls-key, --cluster-tls-ca: its client side
  // toward workers and the controller (mutual TLS), when its user-facing
  // ports use other files or none.
  crypto::TlsClientFiles cluster_tls;
  BatchRootFlags batch;
  ConnectionLimitFlags connections;
  RegistrationLimitFlags registration;  // its registrations' probes
  std::vector<std::string> cors_origins;  // as somm serve's
  bool check_args = false;  // as the worker's
};

struct ControllerProcessOptions {
  std::string model_repository;
  std::string redis = "127.0.0.1:6379";
  std::string address = "127.0.0.1";  // where the control service listens
  int port = 8201;
  std::string advertise;              // what routers dial; "" = address:port
  int metrics_port = 8202;
  std::string controller_id;          // "" = hostname-port
  int leader_lease_ms = 3000;
  ControlLoopFlags control;  // --control-tick-ms, --idle-unload-s
  std::string model_control_mode = "none";  // as somm serve's, and
  std::vector<std::string> load_models;     // --load-model
  double repository_poll_secs = 5;
  bool managed = true;
  // As somm serve's: the leader generates and profiles the variants of
  // every model version that has none, each time it takes the lease (the
  // job of a leader that died mid-way lived in its memory, and is redone).
  bool auto_variants = true;
  std::string device = "auto";
  // Seconds the new leader waits for a first worker before loading the
  // repository's models.
  double wait_for_workers_s = 60;
  // Worker autoscaling (controller/worker_scaler.h) through a provisioner
  // (provisioner/provisioner.h): "none" (the workers are what was started),
  // "local" (children of this process) or "kubernetes" (the worker
  // Deployment's scale subresource).
  std::string provisioner = "none";
  int min_workers = 1;
  int max_workers = 1;
  // WorkerScalerOptions' production defaults; tests shorten them.
  double scale_in_after_s = 300;
  double scale_cooldown_s = 120;
  double scale_in_fill = 0.7;
  double worker_in_use_window_s = 60;
  // local: the binary (""= this one), extra `somm worker` arguments
  // (space-separated; the repository and Redis are this controller's), and
  // the first port (0 = picked by each worker).
  std::string local_worker_binary;
  std::string local_worker_args;
  int local_worker_base_port = 0;
  std::string local_worker_log_dir;  // "" = this process's output
  // kubernetes: "" = the pod's own namespace.
  std::string k8s_namespace;
  std::string k8s_deployment = "somm-worker";
  std::string log_level = "info";
  std::string log_format = "text";  // --log-format text|json (node/log_format.h)
  // --exit-timeout-secs (Triton's): how long a stop waits for calls in
  // flight before it cancels them.
  double exit_timeout_secs = 30;
  // As the worker's: its control service and metrics ports, and its calls
  // to workers.
  crypto::TlsServerFiles tls;
  std::string keys_file;  // as the worker's
  RegistrationLimitFlags registration;  // the leader's variant jobs
  bool check_args = false;  // as the worker's
};

}  // namespace somm
