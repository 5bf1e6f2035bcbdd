#include "node/controller_node.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "cluster_rpc/control_service.h"
#include "cluster_rpc/worker_pool.h"
#include "controller/controller.h"
#include "controller/worker_scaler.h"
#include "metrics/prometheus_metrics.h"
#include "node/catalog_publisher.h"
#include "node/component_options.h"
#include "node/leader_elector.h"
#include "provisioner/kubernetes_provisioner.h"
#include "provisioner/local_provisioner.h"
#include "repository/repository_poller.h"
#include "router/router.h"

namespace somm::node {
namespace {

using redis::RedisClusterStateStore;

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
        control::DecideWorkers(*store_.Read(), in, memory_, Clock::Real().Now(), options_);
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

}  // namespace

Status CheckControllerArgs(const ControllerProcessOptions& o) {
  SOMM_RETURN_IF_ERROR(CheckServiceArgs(o.address, o.tls, o.keys_file, o.redis));
  if (o.provisioner != "none" && o.provisioner != "local" && o.provisioner != "kubernetes") {
    return InvalidArgument("--provisioner must be none, local or kubernetes, not '" +
                           o.provisioner + "'");
  }
  if (o.min_workers < 0 || o.max_workers < o.min_workers) {
    return InvalidArgument("--min-workers and --max-workers: need 0 <= min <= max");
  }
  SOMM_ASSIGN_OR_RETURN(const auto startup, StartupModels(o.model_control_mode, o.load_models));
  for (const std::string& name : startup.value_or(std::vector<std::string>{})) {
    if (!std::filesystem::is_directory(std::filesystem::path(o.model_repository) / name)) {
      return InvalidArgument("--load-model " + name + ": no model folder of that name in " +
                             o.model_repository);
    }
  }
  return Status::Ok();
}

int RunControllerNode(const ControllerProcessOptions& o, const NodeProcess& process) {
  auto tls = MetricsPortTls(o.tls);
  auto metrics_keys = MetricsKeys(o.keys_file);
  if (!tls.ok() || !metrics_keys.ok()) return 2;  // checked above
  PrometheusMetrics metrics;
  auto parts = StartParts(o.model_repository, o.device, o.redis, 3000, /*watch=*/true,
                          RedisClientName("controller", o.controller_id), o.registration,
                          /*with_registrar=*/true);
  if (!parts.ok()) {
    spdlog::error("{}", parts.status().message());
    return 2;
  }
  const Device device = parts->device;
  // Checked by CheckControllerArgs: nullopt = every model of the repository.
  const std::optional<std::vector<std::string>> startup_models =
      StartupModels(o.model_control_mode, o.load_models).value();
  RedisClusterStateStore* store = parts->store.get();
  ModelCatalog& models = *parts->catalog;
  GrpcWorkerPoolOptions pool_options;
  pool_options.stub.tls = crypto::ForPeer(crypto::PeerClientFiles(o.tls), "somm-worker");
  GrpcWorkerPool workers(AddressesOf(*store), pool_options);
  DecisionLog log(1000);
  ControllerOptions co = BuildControllerOptions(o.control, o.managed);
  co.device = device;
  co.fresh_reports = false;  // the workers' heartbeats keep the store fresh
  co.in_use_window_s = o.worker_in_use_window_s;
  // The catalog of what this controller serves, written while it leads
  // (node/catalog_publisher.h); a rollout step reaches the routers at once.
  node::CatalogPublisher catalog(models, *store, RedisClientName("controller", o.controller_id),
                                 redis::NewIncarnation);
  co.on_rollout_change = [&catalog](const std::string&) { catalog.Publish(); };
  Controller controller(co, models, parts->registrar.get(), *store, workers, metrics, log);
  node::CatalogPublishingControl control(controller, catalog);

  std::atomic<bool> leader{false};
  auto service = ControlService::Start(
      control,
      [&models](const std::string& m, int64_t v) {
        return models.Resolve(m, std::to_string(v));
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
    process.request_stop();
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
      // Explicit control: the --load-model names, and what the cluster
      // served under the leader before this one (its catalog), so that a
      // failover keeps the models loaded through the repository API.
      std::optional<std::set<std::string>> wanted;
      if (startup_models) {
        wanted.emplace(startup_models->begin(), startup_models->end());
        for (const auto& [name, generation] : store->ReadCatalog().models) wanted->insert(name);
      }
      for (const std::string& name : models.ListModelFolders()) {
        if (models.IsPublished(name) || (wanted && wanted->count(name) == 0)) continue;
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
        for (const VersionPtr& v : models.All()) {
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

  const char* why = process.wait_for_stop();
  spdlog::info("controller {}: {}: stopping", id, why);
  if (parts->registrar) parts->registrar->Shutdown();  // a variant job in progress is killed at once
  if (poller) poller->Stop();
  scaler.Stop();
  leadership.Stop();
  if (startup && startup->joinable()) startup->join();
  controller.Stop();
  elector.Resign();  // a clean stop hands the lease over at once
  (*service)->Shutdown(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(std::llround(o.exit_timeout_secs * 1000)));
  (*endpoint)->Shutdown();
  scaling.reset();  // a local provisioner's workers drain and exit first
  spdlog::info("controller {} stopped", id);
  return lost ? 3 : 0;
}


}  // namespace somm::node
