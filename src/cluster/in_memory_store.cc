#include "cluster/in_memory_store.h"

#include <map>
#include <tuple>

namespace somm::cluster {

InMemoryClusterStateStore::InMemoryClusterStateStore()
    : snapshot_(std::make_shared<const ClusterState>()) {}

void InMemoryClusterStateStore::PutWorker(WorkerReport report) {
  MutexLock lock(&mu_);
  auto it = workers_.find(report.worker);
  if (it != workers_.end() && it->second.incarnation == report.incarnation &&
      it->second.sequence > report.sequence) {
    return;  // a newer report of the same process already arrived
  }
  workers_[report.worker] = std::move(report);
  RebuildLocked();
}

void InMemoryClusterStateStore::RemoveWorker(const std::string& worker) {
  MutexLock lock(&mu_);
  if (workers_.erase(worker)) RebuildLocked();
}

void InMemoryClusterStateStore::PutDemand(const std::string& router,
                                          std::vector<ModelDemand> demand) {
  MutexLock lock(&mu_);
  demand_[router] = std::move(demand);
  RebuildLocked();
}

std::shared_ptr<const ClusterState> InMemoryClusterStateStore::Read() const {
  MutexLock lock(&mu_);
  return snapshot_;
}

uint64_t InMemoryClusterStateStore::generation() const {
  MutexLock lock(&mu_);
  return generation_;
}

void InMemoryClusterStateStore::RebuildLocked() {
  auto state = std::make_shared<ClusterState>();
  for (const auto& [id, report] : workers_) {
    state->devices.insert(state->devices.end(), report.devices.begin(), report.devices.end());
    state->groups.insert(state->groups.end(), report.groups.begin(), report.groups.end());
  }
  // Demand: counters add up over routers; the tightest SLO and the strictest
  // accuracy floor win.
  std::map<std::pair<std::string, int64_t>, ModelDemand> sum;
  for (const auto& [router, rows] : demand_) {
    for (const ModelDemand& d : rows) {
      auto [it, fresh] = sum.try_emplace({d.model, d.version}, d);
      if (fresh) continue;
      ModelDemand& s = it->second;
      s.arrivals_total += d.arrivals_total;
      s.rate_qps += d.rate_qps;
      if (d.latency_slo_ms > 0 && (s.latency_slo_ms <= 0 || d.latency_slo_ms < s.latency_slo_ms)) {
        s.latency_slo_ms = d.latency_slo_ms;
      }
      if (d.min_accuracy && (!s.min_accuracy || *d.min_accuracy > *s.min_accuracy)) {
        s.min_accuracy = d.min_accuracy;
      }
    }
  }
  for (auto& [_, d] : sum) state->demand.push_back(std::move(d));
  snapshot_ = std::move(state);
  ++generation_;
}

}  // namespace somm::cluster
