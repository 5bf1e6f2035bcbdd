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
  // The routers' demand is exempt from the lag: the controller publishes it
  // and reads it back in the same tick (Controller::before_tick), as the
  // embedded server does. Held back, a tick that follows a rebuild by less
  // than the lag read the previous tick's counters again: a rate of 0, then
  // twice the rate, and a surge answered a tick late.
  if (dirty_ && (rebuilds_ == 0 || demand_dirty_ || now - built_at_ >= options_.view_lag)) {
    if (demand_dirty_) {
      merged_demand_ = cluster::MergeClusterState({}, demand_).demand;
      demand_dirty_ = false;
    }
    auto built = std::make_shared<cluster::ClusterState>(cluster::MergeClusterState(workers_, {}));
    built->demand = merged_demand_;
    snapshot_ = std::move(built);
    dirty_ = false;
    built_at_ = now;
    ++rebuilds_;
  }
  return snapshot_;
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
