#include "simulator/simulated_store.h"

namespace somm::sim {

SimulatedStore::SimulatedStore(const EventLoop& loop, SimulatedStoreOptions options)
    : loop_(loop),
      options_(options),
      snapshot_(std::make_shared<const cluster::ClusterState>()),
      built_at_(loop.Now()) {}

void SimulatedStore::PutWorker(cluster::WorkerReport report) {
  MutexLock lock(&mu_);
  auto it = workers_.find(report.worker);
  if (it != workers_.end() && it->second.incarnation == report.incarnation &&
      it->second.sequence > report.sequence) {
    return;  // a newer report of the same process already arrived
  }
  workers_[report.worker] = std::move(report);
  dirty_ = true;
  ++generation_;
}

void SimulatedStore::RemoveWorker(const std::string& worker) {
  MutexLock lock(&mu_);
  if (workers_.erase(worker) > 0) {
    dirty_ = true;
    ++generation_;
  }
}

void SimulatedStore::PutDemand(const std::string& router,
                               std::vector<cluster::ModelDemand> demand) {
  MutexLock lock(&mu_);
  demand_[router] = std::move(demand);
  dirty_ = true;
  demand_dirty_ = true;
  ++generation_;
}

std::shared_ptr<const cluster::ClusterState> SimulatedStore::Read() const {
  MutexLock lock(&mu_);
  const auto now = loop_.Now();
  if (dirty_ && (rebuilds_ == 0 || now - built_at_ >= options_.view_lag)) {
    if (demand_dirty_) {
      merged_demand_ = cluster::MergeClusterState({}, demand_).demand;
      demand_dirty_ = false;
    }
    std::unique_ptr<cluster::ClusterState> built;
    {
      MutexLock spares_lock(&spares_->mu);
      if (!spares_->states.empty()) {
        built = std::move(spares_->states.back());
        spares_->states.pop_back();
      }
    }
    if (!built) built = std::make_unique<cluster::ClusterState>();
    cluster::MergeClusterStateInto(workers_, {}, built.get());
    built->demand = merged_demand_;
    snapshot_ = std::shared_ptr<const cluster::ClusterState>(built.release(), Recycle{spares_});
    dirty_ = false;
    built_at_ = now;
    ++rebuilds_;
  }
  return snapshot_;
}

void SimulatedStore::Recycle::operator()(const cluster::ClusterState* state) const {
  // Built non-const by Read(), so handing it back as mutable is sound.
  std::unique_ptr<cluster::ClusterState> owned(const_cast<cluster::ClusterState*>(state));
  // A few spares cover the snapshots readers hold at once (the router's,
  // the controller's); more would only keep memory.
  constexpr size_t kMaxSpares = 2;
  MutexLock lock(&spares->mu);
  if (spares->states.size() < kMaxSpares) spares->states.push_back(std::move(owned));
  // else `owned` is freed after the lock is released
}

uint64_t SimulatedStore::generation() const {
  MutexLock lock(&mu_);
  return generation_;
}

int64_t SimulatedStore::rebuilds() const {
  MutexLock lock(&mu_);
  return rebuilds_;
}

}  // namespace somm::sim
