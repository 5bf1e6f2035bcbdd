// somm: one binary, one subcommand per job. Flags follow Triton's names where
// Triton has them (--model-repository, --http-port, --grpc-port, --metrics-port).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "cli/client_cli.h"
#include "cli/commands.h"
#include "cli/keys_command.h"
#include "cli/model_sandbox_command.h"
#include "cli/version_command.h"
#include "common/process_env.h"
#include "node/component_options.h"
#include "node/log_format.h"
#include "router/routing_policy.h"
#include "simulator/simulate_command.h"

namespace {

// --model-control-mode: the modes StartupModels knows, and its message for
// any other; --log-format: the formats CheckLogFormat knows. One list each.
std::string CheckModelControlMode(const std::string& mode) {
  const auto checked = somm::StartupModels(mode, {});
  return checked.ok() ? std::string() : checked.status().message();
}
std::string CheckLogFormatFlag(const std::string& format) {
  const somm::Status checked = somm::node::CheckLogFormat(format);
  return checked.ok() ? std::string() : checked.message();
}

// --log-format and --exit-timeout-secs: every serving process takes both.
void AddLogAndExitFlags(CLI::App* cmd, std::string& log_format, double& exit_timeout_secs) {
  cmd->add_option("--log-format", log_format,
                  "text, or json: one object per line with the same fields (time, logger, "
                  "level, message)")
      ->check(CheckLogFormatFlag)
      ->capture_default_str();
  cmd->add_option("--exit-timeout-secs", exit_timeout_secs,
                  "On SIGTERM, how long calls in flight may finish before they are cancelled "
                  "(as Triton's)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
}

// --routing-policy: the names RoutingPolicy::ByName knows, and its message
// for any other (a new policy needs no change here).
std::string CheckRoutingPolicy(const std::string& name) {
  auto policy = somm::RoutingPolicy::ByName(name);
  return policy.ok() ? std::string() : policy.status().message();
}

}  // namespace

int main(int argc, char** argv) {
  // First of all, before anything reads the environment: `somm serve` runs
  // the models, so it re-executes itself once with OMP_WAIT_POLICY=PASSIVE
  // unless the user set a policy (common/process_env.h says why). The client
  // commands run no models and skip the second start (loading libtorch and
  // the rest again). The subcommand is always argv[1]: the app has no global
  // flags.
  if (argc > 1 && (std::string_view(argv[1]) == "serve" || std::string_view(argv[1]) == "worker")) {
    somm::ReexecWithProcessEnvDefaults(argv);
  }
  // A registration's confined child (cli/model_sandbox_command.h): started
  // by a server only, so it is no subcommand of the help.
  if (argc > 1 && std::string_view(argv[1]) == "model-sandbox") {
    somm::RunModelSandboxCommand(argc, argv);
  }

  CLI::App app{"somm: managed, model-less inference serving"};
  app.require_subcommand(1);
  const std::string version = somm::VersionText(SOMM_VERSION, SOMM_GIT_COMMIT);
  app.set_version_flag("--version", version, "Print the version, the commit it was built from "
                                              "and libtorch's version, and stop");
  auto* version_cmd = app.add_subcommand("version", "As --version: the version, the commit it "
                                                    "was built from and libtorch's version");

  somm::ServeOptions serve;
  auto* serve_cmd = app.add_subcommand("serve", "Serve a model repository over REST and gRPC "
                                                "(Open Inference Protocol v2)");
  serve_cmd->add_option("--model-repository,--repo", serve.model_repository,
                        "Model repository folder")->required();
  serve_cmd->add_option("--address", serve.address, "Address to listen on (beyond loopback needs --auth keys)")->capture_default_str();
  serve_cmd->add_option("--auth", serve.auth, "keys: every call but health probes needs an API key (somm keys); none: loopback only")
      ->capture_default_str()->check(CLI::IsMember({"keys", "none"}));
  serve_cmd->add_option("--keys-file", serve.keys_file, "API key file (default <repo>/.somm/keys)");
  serve_cmd->add_option("--http-port", serve.http_port, "REST port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--grpc-port", serve.grpc_port, "gRPC port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--metrics-port", serve.metrics_port, "Prometheus port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--max-body-bytes", serve.max_body_bytes,
                        "Largest REST body or gRPC message accepted")
      ->capture_default_str()->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  serve_cmd->add_option("--http-threads", serve.http_threads,
                        "REST I/O threads (epoll loops; connections are spread over them); 0 = half the cores, 1 to 4")
      ->capture_default_str()->check(CLI::Range(0, 64));
  serve_cmd->add_option("--max-inflight", serve.max_inflight,
                        "Inference requests (REST and gRPC) admitted at once; more get 429 / RESOURCE_EXHAUSTED before their body is decoded (as Ray Serve's max_ongoing_requests); 0 = no bound")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  serve_cmd->add_option("--max-inflight-bytes", serve.max_inflight_bytes,
                        "Bytes of REST bodies, gRPC messages and decoded tensors held at once (all requests together); past it, 429 / RESOURCE_EXHAUSTED before the body is read. -1 (default) = a quarter of the memory budget (--memory-budget-mb, else half the memory free at start), at least eight times --max-body-bytes; 0 = no bound")
      ->capture_default_str()->check(CLI::Range(int64_t{-1}, int64_t{1} << 50));
  serve_cmd->add_option("--device", serve.device, "auto (a GPU when libtorch has CUDA and one is present), cpu or cuda:N")->capture_default_str();
  serve_cmd->add_option("--inline-max-compute-us", serve.inline_max_compute_us, "An idle one-thread instance runs a query predicted to take at most this long on the REST or gRPC thread that received it, as a worker does (0 = always via its batcher thread; 250 gains about a third at concurrency 1 over gRPC and loses about an eighth over REST: docs/performance.md)")->capture_default_str();
  serve_cmd->add_option("--inline-min-gap-us", serve.inline_min_gap_us, "... and only while its queries come at least this many microseconds apart on average (closer is load, for its batcher thread)")->capture_default_str();
  serve_cmd->add_option("--log-level", serve.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  AddLogAndExitFlags(serve_cmd, serve.log_format, serve.exit_timeout_secs);
  serve_cmd->add_option("--auto-variants", serve.auto_variants,
                        "Generate and profile variants of repository models that have none")
      ->capture_default_str();
  serve_cmd->add_option("--managed", serve.managed,
                        "Managed runtime: autoscale replicas and variants, evict, load on demand "
                        "(false = static provisioning: the configured instances only)")
      ->capture_default_str();
  serve_cmd->add_option("--model-control-mode", serve.model_control_mode,
                        "As Triton's: none (every model loads at start; the repository API's "
                        "load and unload are refused), poll (none, and the repository is "
                        "watched: new and changed models load, removed ones unload; "
                        "--repository-poll-secs) or explicit (only the --load-model models load "
                        "at start; load and unload through the repository API)")
      ->check(CheckModelControlMode)
      ->capture_default_str();
  serve_cmd->add_option("--load-model", serve.load_models,
                        "With --model-control-mode explicit: a model to load at start "
                        "(repeatable; * = every model of the repository)");
  serve_cmd->add_option("--repository-poll-secs", serve.repository_poll_secs,
                        "How often --model-control-mode poll scans the repository")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  serve_cmd->add_option("--explain", serve.routing.explain,
                        "How answers explain somm's choice: compact (one 'somm' parameter holding "
                        "every fact; cheaper to encode) or full (one somm_* parameter per fact); "
                        "a query may ask for either with the parameter somm_explain")
      ->check(CLI::IsMember({"full", "compact"}))
      ->capture_default_str();
  serve_cmd->add_option("--routing-policy", serve.routing.routing_policy,
                        "Where among the workers that hold a query's chosen variant it goes: "
                        "p2c (two drawn at random, the less loaded wins) or least-wait (the "
                        "shortest wait predicted from the queues and the variant's profile)")
      ->check(CheckRoutingPolicy)
      ->capture_default_str();
  serve_cmd->add_option("--control-tick-ms", serve.control.tick_ms,
                        "How often the controller looks at the load")
      ->check(CLI::Range(10, 3600000))
      ->capture_default_str();
  serve_cmd->add_option("--memory-budget-mb", serve.memory_budget_mb,
                        "Memory for instances (0 = half the memory available at start)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve_cmd->add_option("--idle-unload-s", serve.control.idle_unload_s,
                        "Unload a model's instances after this long without queries (0 = 30 s)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve_cmd->add_option("--background-duty", serve.background_duty,
                        "Largest share of wall time that back-to-back background loads and "
                        "unloads may take, so that models serving next to them keep their "
                        "latency (1 = unpaced; loads a query waits for are never paced)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();

  somm::ClientCommandLine client;
  somm::AddClientCommands(app, &client);

  somm::KeysOptions keys;
  auto* keys_cmd = somm::AddKeysCommand(app, &keys);

  somm::sim::SimulateCommandOptions simulate;
  auto* simulate_cmd = somm::sim::AddSimulateCommand(app, &simulate);

  // The cluster's processes (docs/cluster.md).
  somm::WorkerProcessOptions worker;
  auto* worker_cmd = app.add_subcommand(
      "worker", "Cluster worker: hosts model instances for the cluster's routers and controller");
  worker_cmd->add_option("--model-repository,--repo", worker.model_repository,
                         "Shared model repository folder")->required();
  worker_cmd->add_option("--redis", worker.redis, "host:port of the cluster's Redis")->capture_default_str();
  worker_cmd->add_option("--address", worker.address, "Address the worker service listens on")->capture_default_str();
  worker_cmd->add_option("--port", worker.port, "Worker service (gRPC) port (0 = pick a free one)")->capture_default_str();
  worker_cmd->add_option("--advertise", worker.advertise, "host:port routers dial (default: address:port)");
  worker_cmd->add_option("--metrics-port", worker.metrics_port, "Prometheus and health port (0 = pick)")->capture_default_str();
  worker_cmd->add_option("--worker-id", worker.worker_id, "Stable worker name (default hostname-port)");
  worker_cmd->add_option("--zone", worker.zone, "Zone label");
  worker_cmd->add_option("--device", worker.device, "auto, cpu or cuda:N")->capture_default_str();
  worker_cmd->add_option("--memory-budget-mb", worker.memory_budget_mb, "Memory instances may use (0 = half of free RAM)")->capture_default_str();
  worker_cmd->add_option("--inline-max-compute-us", worker.inline_max_compute_us, "An idle one-thread instance runs a query predicted to take at most this long on the RPC thread (0 = always via its batcher thread)")->capture_default_str();
  worker_cmd->add_option("--inline-min-gap-us", worker.inline_min_gap_us, "... and only while its queries come at least this many microseconds apart on average (closer is load, for its batcher thread)")->capture_default_str();
  worker_cmd->add_option("--lease-ms", worker.lease_ms, "Lease of its report in Redis")->capture_default_str();
  worker_cmd->add_option("--heartbeat-ms", worker.heartbeat_ms, "How often it renews the lease")->capture_default_str();
  worker_cmd->add_option("--background-duty", worker.background_duty, "Share of time background loads may take")->capture_default_str();
  worker_cmd->add_option("--log-level", worker.log_level, "trace, debug, info, warn, error")->capture_default_str();
  AddLogAndExitFlags(worker_cmd, worker.log_format, worker.exit_timeout_secs);

  somm::RouterProcessOptions router;
  auto* router_cmd = app.add_subcommand(
      "router", "Cluster router: the Open Inference Protocol (REST and gRPC) in front of the workers");
  router_cmd->add_option("--model-repository,--repo", router.model_repository,
                         "Shared model repository folder (optional: a router serves the "
                         "cluster's catalog)");
  router_cmd->add_option("--state-dir", router.state_dir,
                         "Its audit log, quota file, default key file and batch jobs (default "
                         "<repo>/.somm, or $HOME/.somm without a repository)");
  router_cmd->add_option("--redis", router.redis, "host:port of the cluster's Redis")->capture_default_str();
  router_cmd->add_option("--address", router.address, "Address to listen on (beyond loopback needs --auth keys)")->capture_default_str();
  router_cmd->add_option("--auth", router.auth, "keys: every call but health probes needs an API key (somm keys); none: loopback only")
      ->capture_default_str()->check(CLI::IsMember({"keys", "none"}));
  router_cmd->add_option("--keys-file", router.keys_file, "API key file (default <repo>/.somm/keys)");
  router_cmd->add_option("--http-port", router.http_port, "REST port (0 = pick)")->capture_default_str();
  router_cmd->add_option("--grpc-port", router.grpc_port, "gRPC port (0 = pick)")->capture_default_str();
  router_cmd->add_option("--metrics-port", router.metrics_port, "Prometheus port (0 = pick)")->capture_default_str();
  router_cmd->add_option("--router-id", router.router_id, "Router name (default hostname-port)");
  router_cmd->add_option("--zone", router.routing.zone, "Zone label: prefer workers of this --zone");
  router_cmd->add_option("--cross-zone-rtt-ms", router.routing.cross_zone_rtt_ms, "Round trip to a worker of another zone, added to latency predictions")->capture_default_str();
  router_cmd->add_option("--device", router.device, "Where configured instances run: auto, cpu or cuda:N")->capture_default_str();
  router_cmd->add_option("--max-body-bytes", router.max_body_bytes, "Largest request body or message")->capture_default_str();
  router_cmd->add_option("--http-threads", router.http_threads, "REST I/O threads (0 = half the cores, 1 to 4)")->capture_default_str();
  router_cmd->add_option("--grpc-threads", router.grpc_threads, "Threads serving gRPC and taking the workers' answers (0 = half the cores, 2 to 4)")
      ->capture_default_str()->check(CLI::Range(0, 64));
  router_cmd->add_option("--max-inflight", router.max_inflight,
                         "Inference requests (REST and gRPC) admitted at once; more get 429 / RESOURCE_EXHAUSTED before their body is decoded; 0 = no bound (the workers' queues shed)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  router_cmd->add_option("--max-inflight-bytes", router.max_inflight_bytes,
                         "Bytes of REST bodies, gRPC messages and decoded tensors held at once; past it, 429 / RESOURCE_EXHAUSTED before the body is read. -1 (default) = a quarter of half the memory free at start, at least eight times --max-body-bytes; 0 = no bound")
      ->capture_default_str()->check(CLI::Range(int64_t{-1}, int64_t{1} << 50));
  router_cmd->add_option("--managed", router.managed, "As the controller's --managed (false = pick only loaded variants)")->capture_default_str();
  router_cmd->add_option("--explain", router.routing.explain, "As somm serve's --explain: full or compact")
      ->check(CLI::IsMember({"full", "compact"}))
      ->capture_default_str();
  router_cmd->add_option("--routing-policy", router.routing.routing_policy, "As somm serve's --routing-policy: p2c or least-wait")
      ->check(CheckRoutingPolicy)
      ->capture_default_str();
  router_cmd->add_option("--model-control-mode", router.model_control_mode,
                         "As somm serve's: the repository API's load and unload pass only under "
                         "explicit (the leader controller's flags say what loads at start)")
      ->check(CheckModelControlMode)
      ->capture_default_str();
  router_cmd->add_option("--log-level", router.log_level, "trace, debug, info, warn, error")->capture_default_str();
  AddLogAndExitFlags(router_cmd, router.log_format, router.exit_timeout_secs);

  somm::ControllerProcessOptions ctl;
  auto* controller_cmd = app.add_subcommand(
      "controller", "Cluster controller: placement, autoscaling and the repository API; one leader "
                    "at a time holds a lease in Redis, others stand by");
  controller_cmd->add_option("--model-repository,--repo", ctl.model_repository,
                             "Shared model repository folder")->required();
  controller_cmd->add_option("--redis", ctl.redis, "host:port of the cluster's Redis")->capture_default_str();
  controller_cmd->add_option("--address", ctl.address, "Address the control service listens on")->capture_default_str();
  controller_cmd->add_option("--port", ctl.port, "Control service (gRPC) port (0 = pick)")->capture_default_str();
  controller_cmd->add_option("--advertise", ctl.advertise, "host:port routers dial (default: address:port)");
  controller_cmd->add_option("--metrics-port", ctl.metrics_port, "Prometheus and health port (0 = pick)")->capture_default_str();
  controller_cmd->add_option("--controller-id", ctl.controller_id, "Controller name (default hostname-port)");
  controller_cmd->add_option("--leader-lease-ms", ctl.leader_lease_ms, "Leader lease TTL")->capture_default_str();
  controller_cmd->add_option("--control-tick-ms", ctl.control.tick_ms, "Control loop period")->capture_default_str();
  controller_cmd->add_option("--managed", ctl.managed, "Autoscale, evict and load on demand (false = static)")->capture_default_str();
  controller_cmd->add_option("--auto-variants", ctl.auto_variants,
                             "As leader, generate and profile variants of model versions that have none (also redoes a job its predecessor did not finish)")
      ->capture_default_str();
  controller_cmd->add_option("--model-control-mode", ctl.model_control_mode,
                             "As somm serve's: which models the leader loads when it takes the "
                             "lease (explicit: the --load-model ones and those the cluster "
                             "already served); poll = the leader watches the repository")
      ->check(CheckModelControlMode)
      ->capture_default_str();
  controller_cmd->add_option("--load-model", ctl.load_models,
                             "With --model-control-mode explicit: a model to load (repeatable; "
                             "* = every model)");
  controller_cmd->add_option("--repository-poll-secs", ctl.repository_poll_secs,
                             "How often the leader scans the repository in poll mode")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  controller_cmd->add_option("--idle-unload-s", ctl.control.idle_unload_s, "Seconds idle before a model's instances go (0 = default)")->capture_default_str();
  controller_cmd->add_option("--device", ctl.device, "Where configured instances run: auto, cpu or cuda:N")->capture_default_str();
  controller_cmd->add_option("--wait-for-workers-s", ctl.wait_for_workers_s, "How long a new leader waits for a first worker")->capture_default_str();
  controller_cmd->add_option("--provisioner", ctl.provisioner, "Worker autoscaling: none, local (child processes) or kubernetes (the worker Deployment)")->check(CLI::IsMember({"none", "local", "kubernetes"}))->capture_default_str();
  controller_cmd->add_option("--min-workers", ctl.min_workers, "Fewest workers the provisioner keeps")->capture_default_str();
  controller_cmd->add_option("--max-workers", ctl.max_workers, "Most workers the provisioner starts")->capture_default_str();
  controller_cmd->add_option("--scale-in-after-s", ctl.scale_in_after_s, "Seconds a worker must be spare before it is drained")->capture_default_str();
  controller_cmd->add_option("--scale-cooldown-s", ctl.scale_cooldown_s, "Seconds after a scaling step before a drain")->capture_default_str();
  controller_cmd->add_option("--scale-in-fill", ctl.scale_in_fill, "A worker is drained only if the groups in use then fill the others at most this much")->capture_default_str();
  controller_cmd->add_option("--worker-in-use-window-s", ctl.worker_in_use_window_s, "A group that served a query this recently is in use")->capture_default_str();
  controller_cmd->add_option("--local-worker-binary", ctl.local_worker_binary, "local: the somm binary for workers (default: this one)");
  controller_cmd->add_option("--local-worker-args", ctl.local_worker_args, "local: extra `somm worker` arguments, space-separated");
  controller_cmd->add_option("--local-worker-base-port", ctl.local_worker_base_port, "local: worker k listens on base+10k and base+10k+1 (0 = pick)")->capture_default_str();
  controller_cmd->add_option("--local-worker-log-dir", ctl.local_worker_log_dir, "local: a folder for each worker's output (default: the controller's)");
  controller_cmd->add_option("--k8s-namespace", ctl.k8s_namespace, "kubernetes: the worker Deployment's namespace (default: the pod's)");
  controller_cmd->add_option("--k8s-deployment", ctl.k8s_deployment, "kubernetes: the worker Deployment")->capture_default_str();
  controller_cmd->add_option("--log-level", ctl.log_level, "trace, debug, info, warn, error")->capture_default_str();
  AddLogAndExitFlags(controller_cmd, ctl.log_format, ctl.exit_timeout_secs);

  // Worker and controller: who may read /metrics; router: its client side
  // toward them.
  worker_cmd->add_option("--keys-file", worker.keys_file,
                         "/metrics needs a metrics or admin key from this file (required beyond "
                         "loopback)")->check(CLI::ExistingFile);
  controller_cmd->add_option("--keys-file", ctl.keys_file,
                             "/metrics needs a metrics or admin key from this file (required "
                             "beyond loopback)")->check(CLI::ExistingFile);
  router_cmd->add_option("--cluster-tls-cert", router.cluster_tls.cert_file,
                         "Its client certificate toward workers and the controller (default: "
                         "--tls-cert when --tls-client-ca is given)")->check(CLI::ExistingFile);
  router_cmd->add_option("--cluster-tls-key", router.cluster_tls.key_file,
                         "Private key of --cluster-tls-cert")->check(CLI::ExistingFile);
  router_cmd->add_option("--cluster-tls-ca", router.cluster_tls.ca_file,
                         "The CA of the cluster's certificates")->check(CLI::ExistingFile);
  for (auto [cmd, flag] : {std::pair{serve_cmd, &serve.check_args}, std::pair{worker_cmd, &worker.check_args},
                           std::pair{router_cmd, &router.check_args}, std::pair{controller_cmd, &ctl.check_args}}) {
    cmd->add_flag("--check-args", *flag,
                  "Check the flags as a start would (addresses, TLS, keys, Redis), print ok, and "
                  "stop");
  }

  serve_cmd->add_option("--strict-readiness", serve.strict_readiness,
                        "Ready once every model is available and its configured instances "
                        "loaded (false: once the server is up)")->capture_default_str();
  for (auto [cmd, origins] : {std::pair{serve_cmd, &serve.cors_origins}, std::pair{router_cmd, &router.cors_origins}}) {
    cmd->add_option("--cors-origin", *origins,
                    "A browser origin (https://app.example) allowed to call the REST port "
                    "cross-origin (repeatable; '*' = any); none = CORS off");
  }

  for (auto [cmd, limits] : {std::pair{serve_cmd, &serve.connections}, std::pair{router_cmd, &router.connections}}) {
    cmd->add_option("--header-timeout-s", limits->header_timeout_s,
                    "A request's head must arrive within this many seconds of its first byte")
        ->capture_default_str()->check(CLI::Range(1, 3600));
    cmd->add_option("--body-timeout-s", limits->body_timeout_s,
                    "A body must arrive within this many seconds, plus 1 s per MiB it declares")
        ->capture_default_str()->check(CLI::Range(1, 3600));
    cmd->add_option("--max-connections-per-address", limits->max_connections_per_address,
                    "Open REST connections from one client address (0 = no cap)")
        ->capture_default_str()->check(CLI::NonNegativeNumber);
  }

  // Registration's confined child (docs/hostile-input.md, "Registration runs in
  // a confined child"): the router probes, the controller runs variant jobs.
  for (auto [cmd, limits] : {std::pair{serve_cmd, &serve.registration},
                             std::pair{router_cmd, &router.registration},
                             std::pair{controller_cmd, &ctl.registration}}) {
    cmd->add_option("--registration-cpu-s", limits->cpu_s,
                    "CPU seconds a registration's probe (load, one run) may use")
        ->capture_default_str()->check(CLI::Range(1.0, 86400.0));
    cmd->add_option("--registration-timeout-s", limits->timeout_s,
                    "Seconds a registration's probe may take")
        ->capture_default_str()->check(CLI::Range(1.0, 86400.0));
    cmd->add_option("--registration-memory-mb", limits->memory_mb,
                    "Memory (heap and maps, MiB) a registration's probe and variant job may use")
        ->capture_default_str()->check(CLI::Range(int64_t{64}, int64_t{1} << 30));
    cmd->add_option("--variants-cpu-s", limits->variants_cpu_s,
                    "CPU seconds a variant job (build, profile, int8) may use")
        ->capture_default_str()->check(CLI::Range(1.0, 864000.0));
    cmd->add_option("--variants-timeout-s", limits->variants_timeout_s,
                    "Seconds a variant job may take")
        ->capture_default_str()->check(CLI::Range(1.0, 864000.0));
  }

  // Batch jobs' folders (docs/lifecycle.md, "Batch jobs").
  for (auto [cmd, flags] : {std::pair{serve_cmd, &serve.batch}, std::pair{router_cmd, &router.batch}}) {
    cmd->add_option("--batch-root", flags->root,
                    "Batch jobs read and write only in <root>/<tenant>/ (default "
                    "<state dir>/batch-files)");
    cmd->add_option("--batch-admin-root", flags->admin_roots,
                    "More folders admin keys' batch jobs may use (repeatable)")
        ->check(CLI::ExistingDirectory);
  }

  // TLS (docs/security.md): the servers' ports, and the clients toward them.
  auto add_tls_server_flags = [](CLI::App* cmd, somm::crypto::TlsServerFiles* tls) {
    cmd->add_option("--tls-cert", tls->cert_file,
                    "TLS on every port: certificate chain (PEM); plaintext without it")
        ->check(CLI::ExistingFile);
    cmd->add_option("--tls-key", tls->key_file, "Private key (PEM) of --tls-cert")
        ->check(CLI::ExistingFile);
    cmd->add_option("--tls-client-ca", tls->client_ca_file,
                    "Mutual TLS: clients must present a certificate this CA (PEM) signed; in a "
                    "cluster, also the CA the processes check each other's certificates against")
        ->check(CLI::ExistingFile);
  };
  for (auto [cmd, tls] : {std::pair{serve_cmd, &serve.tls}, std::pair{worker_cmd, &worker.tls},
                          std::pair{router_cmd, &router.tls}, std::pair{controller_cmd, &ctl.tls}}) {
    add_tls_server_flags(cmd, tls);
  }
  CLI11_PARSE(app, argc, argv);
  if (serve_cmd->parsed()) return somm::RunServe(serve);
  if (worker_cmd->parsed()) return somm::RunWorker(worker);
  if (router_cmd->parsed()) return somm::RunRouter(router);
  if (controller_cmd->parsed()) return somm::RunController(ctl);
  if (version_cmd->parsed()) {
    std::printf("%s\n", version.c_str());
    return 0;
  }
  if (const int code = somm::RunClientCommands(client); code >= 0) return code;
  if (keys_cmd->parsed()) return somm::RunKeys(*keys_cmd, keys);
  if (simulate_cmd->parsed()) return somm::sim::RunSimulate(simulate);
  return 1;
}
