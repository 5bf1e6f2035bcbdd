// somm worker, somm router and somm controller: the processes of a cluster
// (docs/cluster.md). Each wires the same nouns as `somm serve`
// (serving/embedded_server.h) around the Redis cluster-state store and the
// cluster's gRPC services instead of direct calls.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "batch/batch_jobs.h"
#include "cli/batch_setup.h"
#include "auth/guard.h"
#include "repository/repository_poller.h"
#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/model_sandbox_command.h"
#include "cluster_rpc/control_service.h"
#include "cluster_rpc/grpc_control_client.h"
#include "cluster_rpc/worker_pool.h"
#include "cluster_rpc/worker_service.h"
#include "common/install_paths.h"
#include "controller/controller.h"
#include "controller/worker_scaler.h"
#include "crypto/tls_stream.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/http/http_frontend.h"
#include "metrics/prometheus_metrics.h"
#include "node/catalog_follower.h"
#include "node/catalog_publisher.h"
#include "node/leader_elector.h"
#include "serving/byte_budget.h"
#include "serving/inflight_limit.h"
#include "redis/redis_cluster_state_store.h"
#include "provisioner/kubernetes_provisioner.h"
#include "provisioner/local_provisioner.h"
#include "registry/model_registry.h"
#include "router/router.h"
#include "runtime/torch/torch_backend.h"
#include "variants/variant_pipeline.h"
#include "worker/worker.h"

namespace somm {
namespace {

using redis::RedisClusterStateStore;

// Logs to stderr (stdout carries the banner), and the stop signals blocked
// in every thread so that only sigwait sees them.
sigset_t SetUpProcess(const std::string& log_level) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("somm"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop;
}

const char* WaitForStop(sigset_t* stop) {
  int signal_number = 0;
  sigwait(stop, &signal_number);
  return signal_number == SIGTERM ? "SIGTERM" : "SIGINT";
}

// "<hostname>-<port>", or "<hostname>-<pid>" when the port is picked at
// start (0).
std::string DefaultId(const std::string& given, int port) {
  if (!given.empty()) return given;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + std::to_string(port != 0 ? port : getpid());
}

// The name a process's Redis connections carry (CLIENT SETNAME): its role
// and its id, or its pid when the id is picked later.
std::string RedisClientName(const std::string& role, const std::string& given_id) {
  return role + ":" + (given_id.empty() ? std::to_string(getpid()) : given_id);
}

StatusOr<std::unique_ptr<RedisClusterStateStore>> OpenStore(const std::string& address,
                                                             int lease_ms, bool watch,
                                                             const std::string& client_name) {
  // The password comes from the environment, never argv (redis/redis_endpoint.h).
  SOMM_ASSIGN_OR_RETURN(
      redis::RedisEndpoint endpoint,
      redis::ParseRedisEndpoint(address, [](const char* n) { return std::getenv(n); }));
  endpoint.client_name = client_name;
  redis::RedisStoreOptions o;
  o.endpoint = endpoint;
  o.lease = std::chrono::milliseconds(lease_ms);
  o.watch = watch;
  return RedisClusterStateStore::Open(o);
}

// What every cluster process starts with: libtorch, its device, the Redis
// store and a registry of the shared repository.
struct ProcessParts {
  std::unique_ptr<Backend> backend;
  Device device;
  std::unique_ptr<RedisClusterStateStore> store;
  std::unique_ptr<ModelRegistry> registry;
};

StatusOr<ProcessParts> StartParts(const std::string& repository, const std::string& device,
                                  const std::string& redis, int lease_ms, bool watch,
                                  const std::string& client_name,
                                  const RegistrationLimitFlags& registration,
                                  TorchBackendOptions backend_options = {}) {
  ProcessParts parts;
  parts.backend = CreateTorchBackend(std::move(backend_options));
  SOMM_ASSIGN_OR_RETURN(parts.device, ParseDeviceFlag(device, *parts.backend));
  SOMM_ASSIGN_OR_RETURN(parts.store, OpenStore(redis, lease_ms, watch, client_name));
  RegistryOptions ro;
  ro.repository_path = repository;
  ro.device = parts.device;
  // What a registration's variant job profiles on and builds int8 with; only
  // the leader controller runs one (ControlClient::StartVariantJob), as
  // `somm serve` does.
  ro.hardware = DefaultHardware(*parts.backend);
  ro.tools_dir = ToolsDir(SOMM_DEFAULT_TOOLS_DIR);  // common/install_paths.h
  // A router probes registrations, the leader runs their variant jobs: in a
  // confined child of this binary (a worker never does either).
  ro.sandbox = MakeRegistrationSandbox(registration);
  parts.registry = std::make_unique<ModelRegistry>(ro, *parts.backend);
  return parts;
}

// The version of `model` the shared repository holds, read afresh (a worker
// loads what the controller names, which may be newer than anything it saw).
StatusOr<VersionPtr> ReadVersion(const ModelRegistry& registry, const std::string& model,
                                 int64_t version) {
  if (!IsValidModelName(model)) return InvalidArgument("invalid model name '" + model + "'");
  std::vector<RepositoryEntry> problems;
  for (const VersionPtr& v : registry.Read(model, &problems)) {
    if (v->version == version) return v;
  }
  std::string why;
  for (const auto& p : problems) why += "; " + p.reason;
  return NotFound("model '" + model + "' version " + std::to_string(version) +
                  " is not in the repository " + registry.options().repository_path + why);
}

// The worker ids and addresses a store's view holds: what a GrpcWorkerPool
// dials.
GrpcWorkerPool::Provider AddressesOf(RedisClusterStateStore& store) {
  return [&store] {
    std::map<std::string, std::string> out;
    for (const auto& [id, report] : store.Workers()) {
      if (!report.address.empty()) out[id] = report.address;
    }
    return out;
  };
}

// The leader's control address from the lease holder "id|host:port".
std::string LeaderAddress(const RedisClusterStateStore& store) {
  const std::string holder = store.LeaseHolder();
  const auto bar = holder.find('|');
  return bar == std::string::npos ? "" : holder.substr(bar + 1);
}

// A loop that runs `step` every `period` until Stop().
class Ticker {
 public:
  Ticker(std::chrono::milliseconds period, std::function<void()> step)
      : period_(period), step_(std::move(step)), thread_([this] { Loop(); }) {}
  ~Ticker() { Stop(); }
  void Poke() { cv_.notify_all(); }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      step_();
      lock.lock();
      cv_.wait_for(lock, period_);
    }
  }
  const std::chrono::milliseconds period_;
  const std::function<void()> step_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The provisioner the controller's flags name; nullptr for "none".
StatusOr<std::unique_ptr<Provisioner>> MakeProvisioner(const ControllerProcessOptions& o,
                                                       const std::string& controller_id) {
  if (o.provisioner == "local") {
    LocalProvisionerOptions lo;
    lo.binary = o.local_worker_binary;
    lo.worker_args = {"--model-repository", o.model_repository, "--redis", o.redis};
    std::istringstream extra(o.local_worker_args);
    for (std::string arg; extra >> arg;) lo.worker_args.push_back(arg);
    // Its workers speak the cluster's TLS and read its metrics keys: this
    // controller's files.
    if (o.tls.enabled()) {
      lo.worker_args.insert(lo.worker_args.end(),
                            {"--tls-cert", o.tls.cert_file, "--tls-key", o.tls.key_file,
                             "--tls-client-ca", o.tls.client_ca_file});
    }
    if (!o.keys_file.empty()) lo.worker_args.insert(lo.worker_args.end(), {"--keys-file", o.keys_file});
    // Unique across controllers: a standby that takes over starts its own.
    lo.id_prefix = controller_id + "-worker-";
    lo.base_port = o.local_worker_base_port;
    lo.log_dir = o.local_worker_log_dir;
    return std::unique_ptr<Provisioner>(std::make_unique<LocalProvisioner>(std::move(lo)));
  }
  if (o.provisioner == "kubernetes") {
    KubernetesProvisionerOptions ko;
    ko.deployment = o.k8s_deployment;
    ko.namespace_name = o.k8s_namespace;
    if (ko.namespace_name.empty()) {
      SOMM_ASSIGN_OR_RETURN(ko.namespace_name, InClusterNamespace());
    }
    SOMM_ASSIGN_OR_RETURN(std::unique_ptr<KubernetesApi> api, InClusterKubernetesApi());
    return std::unique_ptr<Provisioner>(
        std::make_unique<KubernetesProvisioner>(std::move(ko), std::move(api)));
  }
  if (o.provisioner == "none") return std::unique_ptr<Provisioner>();
  return InvalidArgument("unknown --provisioner '" + o.provisioner + "' (none, local, kubernetes)");
}

// The worker scaler on the leader: one decision per tick from the cluster
// state and the controller's placement shortfalls, carried out through the
// provisioner; each step logged with its reason (spdlog, the decision log,
// somm_worker_scale_steps_total and somm_control_actions_total).
class WorkerScaling {
 public:
  WorkerScaling(std::unique_ptr<Provisioner> provisioner, control::WorkerScalerOptions options,
                RedisClusterStateStore& store, Controller& controller,
                PrometheusMetrics& metrics, DecisionLog& log)
      : provisioner_(std::move(provisioner)),
        options_(options),
        store_(store),
        controller_(controller),
        metrics_(metrics),
        log_(log) {}

  void Tick() {
    std::set<std::string> registered;
    for (const auto& [id, report] : store_.Workers()) registered.insert(id);
    control::WorkerScalerInput in;
    StatusOr<int> pending = provisioner_->Pending(registered);
    if (!pending.ok()) {
      Warn(pending.status().message());
      return;
    }
    in.pending = *pending;
    in.removable = provisioner_->Removable(registered);
    const Controller::Shortfalls shortfalls = controller_.PlacementShortfalls();
    in.shortfalls_total = shortfalls.total;
    in.last_shortfall = shortfalls.last;
    const control::WorkerScaleDecision d =
        control::DecideWorkers(*store_.Read(), in, memory_, cluster::Clock::now(), options_);
    metrics_.SetWorkers(d.workers, d.desired);
    using Kind = control::WorkerScaleDecision::Kind;
    if (d.kind == Kind::kHold) {
      memory_ = d.memory;
      if (d.reason != last_hold_) spdlog::debug("worker scaler: hold: {}", d.reason);
      last_hold_ = d.reason;
      return;
    }
    const Status s = d.kind == Kind::kScaleOut ? provisioner_->Start(1) : provisioner_->Stop(d.drain);
    if (!s.ok()) {
      // Decided again next tick: the memory before this step is kept.
      Warn(std::string(control::WorkerScaleKindName(d.kind)) + " not carried out: " + s.message());
      return;
    }
    memory_ = d.memory;
    warned_ = false;
    const std::string kind = d.kind == Kind::kScaleOut ? "scale_out" : "scale_in";
    const std::string line = std::to_string(d.workers) + " -> " + std::to_string(d.desired) +
                             " worker(s) (" + provisioner_->name() + "): " + d.reason;
    spdlog::info("worker scaler: {} {}", kind, line);
    metrics_.RecordWorkerScaleStep(control::WorkerScaleKindName(d.kind), d.cause);
    metrics_.RecordControlAction(kind);
    DecisionRecord r;
    r.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
    r.target = d.drain.empty() ? "workers" : d.drain;
    r.requirements = "controller";
    r.outcome = "control:" + kind;
    r.reason = d.cause + ": " + line;
    log_.Add(std::move(r));
  }

 private:
  void Warn(const std::string& what) {
    if (!warned_) spdlog::warn("worker scaler: {}", what);
    warned_ = true;
  }
  std::unique_ptr<Provisioner> provisioner_;
  const control::WorkerScalerOptions options_;
  RedisClusterStateStore& store_;
  Controller& controller_;
  PrometheusMetrics& metrics_;
  DecisionLog& log_;
  control::WorkerScalerMemory memory_;
  std::string last_hold_;
  bool warned_ = false;
};

// A model's owner as the router's registry has it (the leader's catalog):
// nullopt when no version of it is published here.
auth::Guard::OwnerLookup RegistryOwner(const ModelRegistry& registry) {
  return [&registry](const std::string& model) -> std::optional<std::string> {
    StatusOr<VersionPtr> v = registry.Resolve(model, "");
    if (!v.ok()) return std::nullopt;
    return (*v)->config.owner_tenant;
  };
}

std::string RouterStateDir(const RouterProcessOptions& o) {
  if (!o.state_dir.empty()) return o.state_dir;
  if (!o.model_repository.empty()) {
    return (std::filesystem::path(o.model_repository) / ".somm").string();
  }
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home != nullptr && *home != '\0' ? home : ".") / ".somm").string();
}

// A cluster process's TLS context (null = plaintext). In a cluster TLS is
// mutual or nothing: the client CA is also what each process checks its
// peers' certificates against, and the certificate is also its client one.
StatusOr<std::shared_ptr<const crypto::TlsServerContext>> ClusterTls(
    const crypto::TlsServerFiles& files) {
  if (files.enabled() && files.client_ca_file.empty()) {
    return InvalidArgument(
        "--tls-cert in a cluster needs --tls-client-ca too: routers, workers and controllers "
        "authenticate each other with mutual TLS (scripts/make-certs makes the CA)");
  }
  return crypto::TlsServerContext::CreateIfEnabled(files);
}

// A router's own ports' TLS: one-way TLS is allowed when its client side
// toward the cluster has files of its own (--cluster-tls-*); otherwise its
// files are also its peer identity, and mutual or nothing (ClusterTls).
StatusOr<std::shared_ptr<const crypto::TlsServerContext>> RouterTls(const RouterProcessOptions& o) {
  if (o.cluster_tls.enabled()) return crypto::TlsServerContext::CreateIfEnabled(o.tls);
  return ClusterTls(o.tls);
}

// The TLS of a worker's or a controller's metrics port: its certificate,
// and no client certificate asked for, so that kubelet's probes (which
// present none) and Prometheus (a bearer key) reach it; null = plaintext.
StatusOr<std::shared_ptr<const crypto::TlsServerContext>> MetricsPortTls(
    const crypto::TlsServerFiles& files) {
  crypto::TlsServerFiles server_only = files;
  server_only.client_ca_file.clear();
  return crypto::TlsServerContext::CreateIfEnabled(server_only);
}

// Who may read a worker's or a controller's /metrics: with --keys-file, a
// metrics or admin key from it (private models' names are in there);
// without, anyone (loopback only: CheckClusterListenAddress).
StatusOr<std::pair<std::unique_ptr<auth::Guard>, MetricsAccess>> MetricsKeys(
    const std::string& keys_file) {
  std::pair<std::unique_ptr<auth::Guard>, MetricsAccess> out;
  if (keys_file.empty()) return out;
  auth::GuardOptions go;
  go.mode = auth::AuthMode::kKeys;
  go.keys_path = keys_file;
  go.state_dir = std::filesystem::path(keys_file).parent_path().string();
  SOMM_ASSIGN_OR_RETURN(out.first, auth::Guard::Create(std::move(go)));
  out.second.authorize = [g = out.first.get()](const std::string& a) { return g->AdmitMetrics(a); };
  return out;
}

// The client side of a router toward workers and the controller: its
// --cluster-tls-* files, else its own server files when they are mutual.
crypto::TlsClientFiles RouterPeerFiles(const RouterProcessOptions& o) {
  return o.cluster_tls.enabled() ? o.cluster_tls : crypto::PeerClientFiles(o.tls);
}

// What every cluster process checks of its --redis before it starts: the
// form, and the password's file or variable.
Status CheckRedisFlag(const std::string& address) {
  return redis::ParseRedisEndpoint(address, [](const char* n) { return std::getenv(n); }).status();
}

// A worker's and a controller's checks of their own flags: where they may
// listen, their TLS files, their metrics keys, their Redis.
Status CheckServiceArgs(const std::string& address, const crypto::TlsServerFiles& tls,
                        const std::string& keys_file, const std::string& redis) {
  SOMM_RETURN_IF_ERROR(auth::CheckClusterListenAddress(address, tls, keys_file));
  SOMM_RETURN_IF_ERROR(ClusterTls(tls).status());
  SOMM_RETURN_IF_ERROR(MetricsPortTls(tls).status());
  SOMM_RETURN_IF_ERROR(MetricsKeys(keys_file).status());
  return CheckRedisFlag(redis);
}

// Prints the verdict of --check-args; true when the process should stop
// here (the check was asked for, or failed).
bool ReportArgs(const char* command, const Status& checked, bool check_only) {
  if (!checked.ok()) {
    std::fprintf(stderr, "somm %s: %s\n", command, checked.message().c_str());
    return true;
  }
  if (check_only) std::printf("ok\n");
  return check_only;
}

}  // namespace

Status CheckWorkerArgs(const WorkerProcessOptions& o) {
  return CheckServiceArgs(o.address, o.tls, o.keys_file, o.redis);
}

Status CheckControllerArgs(const ControllerProcessOptions& o) {
  SOMM_RETURN_IF_ERROR(CheckServiceArgs(o.address, o.tls, o.keys_file, o.redis));
  if (o.provisioner != "none" && o.provisioner != "local" && o.provisioner != "kubernetes") {
    return InvalidArgument("--provisioner must be none, local or kubernetes, not '" +
                           o.provisioner + "'");
  }
  if (o.min_workers < 0 || o.max_workers < o.min_workers) {
    return InvalidArgument("--min-workers and --max-workers: need 0 <= min <= max");
  }
  return Status::Ok();
}

Status CheckRouterArgs(const RouterProcessOptions& o) {
  SOMM_ASSIGN_OR_RETURN(auth::AuthMode mode, auth::ParseAuthMode(o.auth));
  SOMM_RETURN_IF_ERROR(auth::CheckListenAddress(mode, o.address, "--address"));
  SOMM_RETURN_IF_ERROR(RouterTls(o).status());
  SOMM_RETURN_IF_ERROR(o.cluster_tls.Validate());
  if (mode == auth::AuthMode::kKeys && !o.keys_file.empty() &&
      !std::filesystem::is_regular_file(o.keys_file)) {
    return InvalidArgument("--keys-file " + o.keys_file + " is not a file");
  }
  SOMM_RETURN_IF_ERROR(ByteBudget::FromFlag(o.max_inflight_bytes, 0, o.max_body_bytes).status());
  return CheckRedisFlag(o.redis);
}

int RunWorker(const WorkerProcessOptions& o) {
  if (const Status checked = CheckWorkerArgs(o); ReportArgs("worker", checked, o.check_args)) {
    return checked.ok() ? 0 : 2;
  }
  sigset_t stop = SetUpProcess(o.log_level);
  auto tls = MetricsPortTls(o.tls);
  auto metrics_keys = MetricsKeys(o.keys_file);
  if (!tls.ok() || !metrics_keys.ok()) return 2;  // checked above
  PrometheusMetrics metrics;
  TorchBackendOptions backend_options;
  backend_options.background_pacer = std::make_shared<DutyCyclePacer>(o.background_duty);
  auto parts = StartParts(o.model_repository, o.device, o.redis, o.lease_ms, /*watch=*/false,
                          RedisClientName("worker", o.worker_id), RegistrationLimitFlags{},
                          backend_options);
  if (!parts.ok()) {
    spdlog::error("{}", parts.status().message());
    return 2;
  }
  Backend& backend_ref = *parts->backend;
  const Device device = parts->device;
  RedisClusterStateStore* store = parts->store.get();
  ModelRegistry& registry = *parts->registry;

  std::atomic<bool> draining{false};
  std::unique_ptr<Ticker> heartbeat;
  WorkerOptions wo;
  wo.zone = o.zone;
  wo.device = device;
  wo.memory_budget_bytes = static_cast<int64_t>(o.memory_budget_mb * 1024 * 1024);
  wo.background_pacer = backend_options.background_pacer;
  wo.inline_max_compute_us = o.inline_max_compute_us;
  wo.inline_min_gap_us = o.inline_min_gap_us;
  // A change of the groups is reported at once, not at the next beat.
  wo.on_change = [&heartbeat] {
    if (heartbeat) heartbeat->Poke();
  };
  const std::string id = DefaultId(o.worker_id, o.port);
  wo.id = id;
  Worker worker_instance(wo, backend_ref, metrics);
  Worker* worker = &worker_instance;
  WorkerServiceOptions so;
  so.address = o.address;
  so.port = o.port;
  so.tls = o.tls;
  auto service = WorkerService::Start(
      *worker, [&registry](const std::string& m, int64_t v) { return ReadVersion(registry, m, v); },
      so);
  if (!service.ok()) {
    spdlog::error("{}", service.status().message());
    return 2;
  }
  const int port = (*service)->port();
  const std::string advertise =
      o.advertise.empty() ? DialHost(o.address) + ":" + std::to_string(port) : o.advertise;
  const std::string incarnation = redis::NewIncarnation();
  int64_t sequence = 0;
  bool warned = false;
  // Ready once its report is in Redis (routers can find it), until it drains.
  std::atomic<bool> registered{false};
  heartbeat = std::make_unique<Ticker>(std::chrono::milliseconds(o.heartbeat_ms), [&] {
    if (draining) return;
    cluster::WorkerReport report = worker->Report();
    report.incarnation = incarnation;
    report.sequence = ++sequence;
    report.address = advertise;
    report.zone = o.zone;
    const Status s = store->WriteWorker(report);
    registered = s.ok();
    if (!s.ok() && !warned) spdlog::warn("worker {}: heartbeat not written: {}", id, s.message());
    if (s.ok() && warned) spdlog::info("worker {}: heartbeats are written again", id);
    warned = !s.ok();
  });
  auto endpoint = MetricsEndpoint::Start(metrics, o.address, o.metrics_port,
                                         [&draining, &registered] {
                                           return registered.load() && !draining.load();
                                         },
                                         metrics_keys->second, *tls);
  if (!endpoint.ok()) {
    spdlog::error("{}", endpoint.status().message());
    return 2;
  }
  std::printf("somm worker: listening grpc=%d metrics=%d id=%s\n", port, (*endpoint)->port(),
              id.c_str());
  std::fflush(stdout);
  spdlog::info("worker {} (incarnation {}) serves {} from {}, reports to redis at {}", id,
               incarnation, advertise, o.model_repository, o.redis);

  const char* why = WaitForStop(&stop);
  // Drain: leave routing first (no new queries), then finish what is in
  // flight, then go.
  spdlog::info("worker {}: {}: deregistering, then finishing the queries in flight", id, why);
  draining = true;
  heartbeat->Stop();
  store->RemoveWorker(id);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // routers' views follow
  (*service)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(30));
  worker->Shutdown();
  (*endpoint)->Shutdown();
  spdlog::info("worker {} stopped cleanly", id);
  return 0;
}

int RunRouter(const RouterProcessOptions& o) {
  if (const Status checked = CheckRouterArgs(o); ReportArgs("router", checked, o.check_args)) {
    return checked.ok() ? 0 : 2;
  }
  sigset_t stop = SetUpProcess(o.log_level);
  auto tls = RouterTls(o);
  if (!tls.ok()) {
    spdlog::error("{}", tls.status().message());
    return 2;
  }
  // Its own files (audit log, quota file, default key file, batch jobs):
  // --state-dir, else the repository's .somm/, else $HOME/.somm.
  const std::string state_dir = RouterStateDir(o);
  // The router is the cluster's front door: keys are checked here.
  auto guard = auth::Guard::ForServer(o.auth, o.address, o.model_repository, o.keys_file, state_dir);
  if (!guard.ok()) {
    spdlog::error("{}", guard.status().message());
    return 2;
  }
  PrometheusMetrics metrics;
  auto parts = StartParts(o.model_repository, o.device, o.redis, 3000, /*watch=*/true,
                          RedisClientName("router", o.router_id), o.registration);
  if (!parts.ok()) {
    spdlog::error("{}", parts.status().message());
    return 2;
  }
  const Device device = parts->device;
  RedisClusterStateStore* store = parts->store.get();
  ModelRegistry& registry = *parts->registry;
  // Owners come from the catalog: a router may have no repository mounted.
  (*guard)->SetOwnerLookup(RegistryOwner(registry));
  node::CatalogFollower catalog(registry, *store);
  catalog.Start();

  GrpcWorkerPoolOptions pool_options;
  pool_options.stub.tls = crypto::ForPeer(RouterPeerFiles(o), "somm-worker");
  GrpcWorkerPool workers(AddressesOf(*store), pool_options);
  GrpcControlClient leader([store] { return LeaderAddress(*store); }, device,
                           std::chrono::minutes(5),
                           crypto::ForPeer(RouterPeerFiles(o), "somm-controller"));
  node::CatalogFollowingControl control(leader, catalog, registry);
  DecisionLog log(1000);
  RouterOptions rto;
  rto.id = DefaultId(o.router_id, o.http_port);
  rto.managed = o.managed;
  rto.compact_explanation = o.explain == "compact";
  rto.zone = o.zone;
  rto.cross_zone_rtt_ms = o.cross_zone_rtt_ms;
  // Ready means able to serve: the catalog is here, a leader controller and
  // a live worker are seen (a query before that was answered 404 or 503).
  // With a repository mounted, its models must be in the catalog too (an
  // empty catalog is a cluster that serves nothing yet, ready to register).
  rto.ready = [store, &workers, &registry] {
    if (LeaderAddress(*store).empty() || workers.Ids().empty()) return false;
    return !store->ReadCatalog().models.empty() || registry.ListModelFolders().empty();
  };
  Router router(rto, registry, *store, workers, control, metrics, log);
  Ticker demand(std::chrono::milliseconds(1000), [&router] { router.PublishDemand(); });
  // Offline batch jobs run on the router that took them, beside its queries;
  // their state is kept in its state folder, so a restarted router resumes
  // them when that folder outlives it.
  auto bo = BatchSetup(o.batch, state_dir, rto.id, o.model_repository, guard->get());
  if (!bo.ok()) {
    spdlog::error("{}", bo.status().message());
    return 2;
  }
  bo->inflight = [&router] { return router.InflightQueries(); };
  auto batch = std::make_unique<BatchJobs>(std::move(bo).value(), router);
  spdlog::info("router {}: audit log, quota file and batch jobs in {}; batch files under {}",
               rto.id, state_dir, batch->paths()->root());

  // One bound for both frontends, as in `somm serve`, and one byte budget.
  InflightLimit inflight_limit(InflightLimit::Options{o.max_inflight, 1, &metrics});
  const int64_t max_inflight_bytes =
      InflightBytesBudget(o.max_inflight_bytes, 0, o.max_body_bytes).value();  // checked above
  ByteBudget byte_budget(ByteBudget::Options{max_inflight_bytes, 1, &metrics});
  spdlog::info("router {}: bytes of request bodies and tensors in flight: at most {}", rto.id,
               max_inflight_bytes > 0 ? ByteBudget::Mib(max_inflight_bytes) : "no bound");
  GrpcFrontendOptions go;
  go.address = o.address;
  go.port = o.grpc_port;
  go.max_message_bytes = static_cast<int>(o.max_body_bytes);
  go.guard = guard->get();
  go.inflight_limit = &inflight_limit;
  go.byte_budget = &byte_budget;
  go.tls = o.tls;
  go.infer_threads = o.grpc_threads;
  go.min_infer_threads = 2;
  auto grpc = GrpcFrontend::Start(router, go);
  if (!grpc.ok()) {
    spdlog::error("gRPC frontend: {}", grpc.status().message());
    return 2;
  }
  // The worker calls' answers come back on the frontend's completion queue,
  // taken by its threads: no other thread polls gRPC in a router, which
  // spares gRPC's callback threads and their hand-offs (docs/cluster.md, the
  // router hop). Before the REST frontend starts, so that no query is on its
  // way yet.
  workers.UseQueue((*grpc)->queue());
  leader.UseQueue((*grpc)->queue());
  HttpFrontendOptions ho;
  ho.batch = batch.get();
  ho.inflight_limit = &inflight_limit;
  ho.byte_budget = &byte_budget;
  ho.address = o.address;
  ho.port = o.http_port;
  ho.max_body_bytes = static_cast<size_t>(o.max_body_bytes);
  ho.io_threads = o.http_threads;
  ho.metrics_text = [&metrics] { return metrics.Serialize(); };
  ho.guard = guard->get();
  ho.origin_policy.loopback_hosts_only = (*guard)->mode() == auth::AuthMode::kNone;
  ho.origin_policy.cors_origins = o.cors_origins;
  ho.header_timeout_s = o.connections.header_timeout_s;
  ho.body_timeout_s = o.connections.body_timeout_s;
  ho.max_connections_per_address = static_cast<size_t>(o.connections.max_connections_per_address);
  ho.tls = *tls;
  auto http = HttpFrontend::Start(router, ho);
  if (!http.ok()) {
    spdlog::error("REST frontend: {}", http.status().message());
    return 2;
  }
  MetricsAccess metrics_access;
  metrics_access.authorize = [g = guard->get()](const std::string& a) { return g->AdmitMetrics(a); };
  metrics_access.extra_text = [g = guard->get()] { return g->MetricsText(); };
  // How stale its view of the cluster gets (docs/cluster.md, "Steady-state
  // cost of the cluster state").
  store->SetOnViewLag(metrics.ViewLagRecorder("router:" + rto.id));
  auto endpoint = MetricsEndpoint::Start(metrics, o.address, o.metrics_port, nullptr,
                                         std::move(metrics_access), *tls);
  if (!endpoint.ok()) {
    spdlog::error("{}", endpoint.status().message());
    return 2;
  }
  // The same first line as `somm serve`: scripts and tests read it.
  std::printf("somm: listening http=%d grpc=%d metrics=%d\n", (*http)->port(), (*grpc)->port(),
              (*endpoint)->port());
  if (batch) batch->ResumeAll();
  std::printf("somm router %s: the cluster at redis %s\n", rto.id.c_str(), o.redis.c_str());
  std::fflush(stdout);

  const char* why = WaitForStop(&stop);
  spdlog::info("router {}: {}: finishing the queries in flight", rto.id, why);
  registry.Shutdown();  // a registration's probe in progress is killed at once
  if (batch) batch->Shutdown();  // before the router refuses their items
  router.Shutdown();
  (*http)->Shutdown();
  (*grpc)->Shutdown(std::chrono::seconds(30));
  demand.Stop();
  (*endpoint)->Shutdown();
  // The watch thread calls into `catalog`, which goes before the store does:
  // a change notice during the teardown (a worker draining) used it freed.
  store->StopWatching();
  spdlog::info("router {} stopped cleanly", rto.id);
  return 0;
}

int RunController(const ControllerProcessOptions& o) {
  if (const Status checked = CheckControllerArgs(o); ReportArgs("controller", checked, o.check_args)) {
    return checked.ok() ? 0 : 2;
  }
  sigset_t stop = SetUpProcess(o.log_level);
  auto tls = MetricsPortTls(o.tls);
  auto metrics_keys = MetricsKeys(o.keys_file);
  if (!tls.ok() || !metrics_keys.ok()) return 2;  // checked above
  PrometheusMetrics metrics;
  TorchBackendOptions backend_options;
  auto parts = StartParts(o.model_repository, o.device, o.redis, 3000, /*watch=*/true,
                          RedisClientName("controller", o.controller_id), o.registration,
                          backend_options);
  if (!parts.ok()) {
    spdlog::error("{}", parts.status().message());
    return 2;
  }
  const Device device = parts->device;
  RedisClusterStateStore* store = parts->store.get();
  ModelRegistry& registry = *parts->registry;
  GrpcWorkerPoolOptions pool_options;
  pool_options.stub.tls = crypto::ForPeer(crypto::PeerClientFiles(o.tls), "somm-worker");
  GrpcWorkerPool workers(AddressesOf(*store), pool_options);
  DecisionLog log(1000);
  ControllerOptions co;
  co.managed = o.managed;
  co.control_tick_ms = std::max(o.control_tick_ms, 10);
  co.idle_unload_s = o.idle_unload_s;
  co.device = device;
  co.fresh_reports = false;  // the workers' heartbeats keep the store fresh
  co.in_use_window_s = o.worker_in_use_window_s;
  // The catalog of what this controller serves, written while it leads
  // (node/catalog_publisher.h); a rollout step reaches the routers at once.
  node::CatalogPublisher catalog(registry, *store, RedisClientName("controller", o.controller_id),
                                 redis::NewIncarnation);
  co.on_rollout_change = [&catalog](const std::string&) { catalog.Publish(); };
  Controller controller(co, registry, *store, workers, metrics, log);
  node::CatalogPublishingControl control(controller, catalog);

  std::atomic<bool> leader{false};
  auto service = ControlService::Start(
      control,
      [&registry](const std::string& m, int64_t v) {
        return registry.Resolve(m, std::to_string(v));
      },
      [&leader] { return leader.load(); }, ControlServiceOptions{o.address, o.port, o.tls});
  if (!service.ok()) {
    spdlog::error("{}", service.status().message());
    return 2;
  }
  const int port = (*service)->port();
  const std::string id = DefaultId(o.controller_id, port);
  const std::string advertise =
      o.advertise.empty() ? DialHost(o.address) + ":" + std::to_string(port) : o.advertise;
  const std::string holder = id + "|" + advertise;
  // The controller keeps the same view as a router: how stale it gets.
  store->SetOnViewLag(metrics.ViewLagRecorder("controller:" + id));
  // Ready while it holds the leader lease or sees who does (a standby that
  // follows); not while Redis is out of reach.
  auto endpoint = MetricsEndpoint::Start(
      metrics, o.address, o.metrics_port,
      [&leader, store] { return leader.load() || !LeaderAddress(*store).empty(); },
      metrics_keys->second, *tls);
  if (!endpoint.ok()) {
    spdlog::error("{}", endpoint.status().message());
    return 2;
  }
  std::printf("somm controller: listening control=%d metrics=%d id=%s\n", port,
              (*endpoint)->port(), id.c_str());
  std::fflush(stdout);
  auto provisioner = MakeProvisioner(o, id);
  if (!provisioner.ok()) {
    spdlog::error("{}", provisioner.status().message());
    return 2;
  }
  std::unique_ptr<WorkerScaling> scaling;
  if (*provisioner) {
    control::WorkerScalerOptions so;
    so.min_workers = o.min_workers;
    so.max_workers = std::max(o.max_workers, o.min_workers);
    so.scale_in_after_s = o.scale_in_after_s;
    so.cooldown_s = o.scale_cooldown_s;
    so.scale_in_fill = o.scale_in_fill;
    so.in_use_window_s = o.worker_in_use_window_s;
    spdlog::info("controller {}: {} provisioner, {} to {} workers", id, (*provisioner)->name(),
                 so.min_workers, so.max_workers);
    scaling = std::make_unique<WorkerScaling>(std::move(provisioner).value(), so, *store,
                                              controller, metrics, log);
  }

  std::atomic<bool> lost{false};
  std::atomic<bool> started{false};
  std::unique_ptr<std::thread> startup;
  node::LeaderElectorOptions eo;
  eo.holder = holder;
  eo.lease = std::chrono::milliseconds(o.leader_lease_ms);
  eo.on_lost = [&](const std::string& why) {
    // A lapsed lease may already be another's: stop acting at once; the
    // supervisor starts this process again as a standby.
    spdlog::error("controller {}: lost the leader lease ({}); exiting", id, why);
    lost = true;
    leader = false;
    kill(getpid(), SIGTERM);
  };
  eo.on_elected = [&] {
    leader = true;
    spdlog::info("controller {}: took the leader lease; loading the repository's models", id);
    startup = std::make_unique<std::thread>([&] {
      const auto give_up = std::chrono::steady_clock::now() +
                           std::chrono::milliseconds(static_cast<int64_t>(o.wait_for_workers_s * 1000));
      while (workers.Ids().empty() && std::chrono::steady_clock::now() < give_up && !lost) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      for (const std::string& name : registry.ListModelFolders()) {
        if (registry.IsPublished(name)) continue;
        const Status s = controller.LoadModel(name, /*startup=*/true);
        if (!s.ok()) spdlog::error("model {}: {}", name, s.message());
        // At once, not at the next lease tick: a router that sees the
        // model queues its queries behind the load instead of answering
        // 404 for a second.
        catalog.Publish();
      }
      if (o.auto_variants) {
        // Variant jobs run on the leader and live in its memory: one that a
        // dead leader did not finish left its model without profiles, and
        // is redone here, as are models placed in the repository by hand.
        for (const VersionPtr& v : registry.All()) {
          if (!v->profiles.empty()) continue;
          spdlog::info("controller {}: {}:{} has no profiled variants; generating them", id,
                       v->config.name, v->version);
          const Status s = controller.StartVariantJob(v->config.name, v->version);
          if (!s.ok()) spdlog::error("variants of {}: {}", v->config.name, s.message());
        }
      }
      catalog.SetStartedUp();  // each publication from now on lists everything
      catalog.Publish();
      controller.Start();
      started = true;
      // Scripts and tests wait for this line before the first repository call.
      spdlog::info("controller {}: leading, with {} worker(s) in view", id, workers.Ids().size());
    });
  };
  node::LeaderElector elector(*store, std::move(eo));
  Ticker leadership(elector.tick_period(), [&] {
    elector.Tick();
    if (elector.leading() && started) catalog.Publish();
  });
  // Only the leader scales workers (a standby's view may be as good, but two
  // scalers would each add the worker the cluster lacks), and only once it
  // has started: before, the workers that exist may not have registered.
  Ticker scaler(std::chrono::milliseconds(co.control_tick_ms), [&] {
    if (scaling && leader && started && !lost) scaling->Tick();
  });
  // --model-control-mode poll: the leader watches the shared repository; the
  // routers follow through the catalog it publishes each lease tick.
  std::unique_ptr<RepositoryPoller> poller;
  if (o.model_control_mode == "poll") {
    RepositoryPollerOptions po;
    po.repository = o.model_repository;
    po.period = std::chrono::milliseconds(static_cast<int64_t>(o.repository_poll_secs * 1000));
    po.load = [&controller](const std::string& m) { return controller.LoadModel(m); };
    po.unload = [&controller](const std::string& m) { return controller.UnloadModel(m); };
    po.active = [&] { return leader && started && !lost; };
    poller = std::make_unique<RepositoryPoller>(std::move(po));
  }

  const char* why = WaitForStop(&stop);
  spdlog::info("controller {}: {}: stopping", id, why);
  registry.Shutdown();  // a variant job in progress is killed at once
  if (poller) poller->Stop();
  scaler.Stop();
  leadership.Stop();
  if (startup && startup->joinable()) startup->join();
  controller.Stop();
  elector.Resign();  // a clean stop hands the lease over at once
  (*service)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  (*endpoint)->Shutdown();
  scaling.reset();  // a local provisioner's workers drain and exit first
  spdlog::info("controller {} stopped", id);
  return lost ? 3 : 0;
}

}  // namespace somm
