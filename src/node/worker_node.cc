#include "node/worker_node.h"

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
#include <set>
#include <sstream>
#include <thread>

#include "cluster_rpc/worker_service.h"
#include "common/duty_cycle_pacer.h"
#include "metrics/prometheus_metrics.h"
#include "variants/variant_pipeline.h"
#include "worker/worker.h"

namespace somm::node {
namespace {

using redis::RedisClusterStateStore;

// The version of `model` the shared repository holds, read afresh (a worker
// loads what the controller names, which may be newer than anything it saw).
StatusOr<VersionPtr> ReadVersion(const ModelCatalog& models, const std::string& model,
                                 int64_t version) {
  if (!IsValidModelName(model)) return InvalidArgument("invalid model name '" + model + "'");
  std::vector<RepositoryEntry> problems;
  for (const VersionPtr& v : models.Read(model, &problems)) {
    if (v->version == version) return v;
  }
  std::string why;
  for (const auto& p : problems) why += "; " + p.reason;
  return NotFound("model '" + model + "' version " + std::to_string(version) +
                  " is not in the repository " + models.repository_path() + why);
}

}  // namespace

Status CheckWorkerArgs(const WorkerProcessOptions& o) {
  return CheckServiceArgs(o.address, o.tls, o.keys_file, o.redis);
}

int RunWorkerNode(const WorkerProcessOptions& o, const NodeProcess& process) {
  auto tls = MetricsPortTls(o.tls);
  auto metrics_keys = MetricsKeys(o.keys_file);
  if (!tls.ok() || !metrics_keys.ok()) return 2;  // checked above
  PrometheusMetrics metrics;
  // One pacer: the backends record background work, the worker waits.
  const auto pacer = std::make_shared<DutyCyclePacer>(o.background_duty);
  auto parts = StartParts(o.model_repository, o.device, o.redis, o.lease_ms, /*watch=*/false,
                          RedisClientName("worker", o.worker_id), RegistrationLimitFlags{},
                          /*with_registrar=*/false,
                          pacer);
  if (!parts.ok()) {
    spdlog::error("{}", parts.status().message());
    return 2;
  }
  const Device device = parts->device;
  RedisClusterStateStore* store = parts->store.get();
  ModelCatalog& models = *parts->catalog;

  std::atomic<bool> draining{false};
  std::unique_ptr<Ticker> heartbeat;
  WorkerOptions wo;
  wo.zone = o.zone;
  wo.device = device;
  wo.memory_budget_bytes = static_cast<int64_t>(o.memory_budget_mb * 1024 * 1024);
  wo.background_pacer = pacer;
  wo.inline_max_compute_us = o.inline_max_compute_us;
  wo.inline_min_gap_us = o.inline_min_gap_us;
  // A change of the groups is reported at once, not at the next beat.
  wo.on_change = [&heartbeat] {
    if (heartbeat) heartbeat->Poke();
  };
  const std::string id = DefaultId(o.worker_id, o.port);
  wo.id = id;
  Worker worker_instance(wo, parts->backends, metrics);
  Worker* worker = &worker_instance;
  WorkerServiceOptions so;
  so.address = o.address;
  so.port = o.port;
  so.tls = o.tls;
  auto service = WorkerService::Start(
      *worker, [&models](const std::string& m, int64_t v) { return ReadVersion(models, m, v); },
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

  const char* why = process.wait_for_stop();
  // Drain: leave routing first (no new queries), then finish what is in
  // flight, then go.
  spdlog::info("worker {}: {}: deregistering, then finishing the queries in flight", id, why);
  draining = true;
  heartbeat->Stop();
  store->RemoveWorker(id);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // routers' views follow
  (*service)->Shutdown(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(std::llround(o.exit_timeout_secs * 1000)));
  worker->Shutdown();
  (*endpoint)->Shutdown();
  spdlog::info("worker {} stopped cleanly", id);
  return 0;
}


}  // namespace somm::node
