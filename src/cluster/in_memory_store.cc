#include "cluster/in_memory_store.h"


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
  snapshot_ = std::make_shared<const ClusterState>(MergeClusterState(workers_, demand_));
  ++generation_;
}

}  // namespace somm::cluster
