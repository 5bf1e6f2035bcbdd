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
  if (it != workers_.end() && it->second.report.incarnation == report.incarnation &&
      it->second.report.sequence > report.sequence) {
    return;  // a newer report of the same process already arrived
  }
  ++generation_;
  if (it == workers_.end()) {
    ++membership_;
    it = workers_.try_emplace(report.worker).first;
  }
  it->second.report = std::move(report);
  it->second.put_at = generation_;
  dirty_ = true;
}

void SimulatedStore::RemoveWorker(const std::string& worker) {
  MutexLock lock(&mu_);
  if (workers_.erase(worker) > 0) {
    ++membership_;
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
    Rebuild();
  }
  return snapshot_;
}

std::shared_ptr<const cluster::ClusterState> SimulatedStore::ReadFresh() const {
  MutexLock lock(&mu_);
  if (dirty_) Rebuild();
  return snapshot_;
}

void SimulatedStore::Rebuild() const {
  const auto now = loop_.Now();
  if (demand_dirty_) {
    merged_demand_ = cluster::MergeClusterState({}, demand_).demand;
    demand_dirty_ = false;
  }
  std::unique_ptr<Built> built;
  {
    MutexLock spares_lock(&spares_->mu);
    if (!spares_->built.empty()) {
      built = std::move(spares_->built.back());
      spares_->built.pop_back();
    }
  }
  if (!built) built = std::make_unique<Built>();
  Merge(built.get());
  Built* raw = built.get();
  snapshot_ = std::shared_ptr<const cluster::ClusterState>(
      std::shared_ptr<Built>(built.release(), Recycle{spares_}), &raw->state);
  dirty_ = false;
  built_at_ = now;
  ++rebuilds_;
}

namespace {

// Sets items [at, at + from.size()) of `*to` to `from`, assigning over the
// items there (their strings and vectors keep their memory); `at` is at
// most to->size().
template <typename T>
void AssignAt(const std::vector<T>& from, size_t at, std::vector<T>* to) {
  for (const T& item : from) {
    if (at < to->size()) {
      (*to)[at] = item;
    } else {
      to->push_back(item);
    }
    ++at;
  }
}

// Moves the items from `from` to the end of *v so that they start at `to`
// instead (the vector grows or shrinks by the difference). Moved, not
// copied: their strings and vectors go along without new memory.
template <typename T>
void ShiftTail(std::vector<T>* v, size_t from, size_t to) {
  if (to > from) {
    const size_t old_size = v->size();
    v->resize(old_size + (to - from));
    std::move_backward(v->begin() + static_cast<std::ptrdiff_t>(from),
                       v->begin() + static_cast<std::ptrdiff_t>(old_size), v->end());
  } else if (to < from) {
    std::move(v->begin() + static_cast<std::ptrdiff_t>(from), v->end(),
              v->begin() + static_cast<std::ptrdiff_t>(to));
    v->resize(v->size() - (from - to));
  }
}

}  // namespace

void SimulatedStore::Merge(Built* built) const {
  // MergeClusterState's devices and groups (each group with its worker's
  // zone), over what `built` holds from its last build: a worker whose
  // report is the same as then, at the same place, is left as it is.
  // When a worker's report changed its number of devices or groups (a load,
  // an unload), the workers after it are moved along, not copied again.
  cluster::ClusterState& state = built->state;
  const bool same_workers =
      built->membership == membership_ && built->counts.size() == workers_.size();
  size_t devices = 0, groups = 0, k = 0;
  built->counts.resize(workers_.size());
  for (const auto& [id, held] : workers_) {
    const cluster::WorkerReport& r = held.report;
    const std::pair<size_t, size_t> counts{r.devices.size(), r.groups.size()};
    const bool resized = same_workers && built->counts[k] != counts;
    if (resized) {
      ShiftTail(&state.devices, devices + built->counts[k].first, devices + counts.first);
      ShiftTail(&state.groups, groups + built->counts[k].second, groups + counts.second);
    }
    if (!same_workers || resized || held.put_at > built->generation) {
      AssignAt(r.devices, devices, &state.devices);
      AssignAt(r.groups, groups, &state.groups);
      for (size_t i = groups; i < groups + r.groups.size(); ++i) state.groups[i].zone = r.zone;
    }
    built->counts[k++] = counts;
    devices += counts.first;
    groups += counts.second;
  }
  state.devices.resize(devices);
  state.groups.resize(groups);
  state.demand = merged_demand_;
  built->generation = generation_;
  built->membership = membership_;
}

void SimulatedStore::Recycle::operator()(Built* built) const {
  std::unique_ptr<Built> owned(built);
  // A few spares cover the snapshots readers hold at once (the router's,
  // the controller's); more would only keep memory.
  constexpr size_t kMaxSpares = 2;
  MutexLock lock(&spares->mu);
  if (spares->built.size() < kMaxSpares) spares->built.push_back(std::move(owned));
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
