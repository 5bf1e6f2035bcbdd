#include "worker/instance_group.h"

namespace somm {

InstanceGroup::InstanceGroup(std::string variant_id, HardwareConfig hardware,
                             std::vector<std::unique_ptr<Batcher>> instances,
                             std::vector<int64_t> ids, int64_t memory_bytes, const Clock* clock)
    : variant_id_(std::move(variant_id)),
      hardware_(hardware),
      memory_bytes_(memory_bytes),
      clock_(clock ? *clock : Clock::Real()),
      last_used_ns_(clock_.Now().time_since_epoch().count()) {
  auto r = std::make_shared<Replicas>();
  for (size_t i = 0; i < instances.size(); ++i) {
    r->push_back({ids.at(i), std::shared_ptr<Batcher>(std::move(instances[i]))});
  }
  WriterLock lock(&mu_);
  replicas_ = std::move(r);
}

InstanceGroup::~InstanceGroup() {
  for (auto& r : *replicas()) r.batcher->Stop();
}

std::shared_ptr<const InstanceGroup::Replicas> InstanceGroup::replicas() const {
  ReaderLock lock(&mu_);
  return replicas_;
}

Status InstanceGroup::Enqueue(BatchTask task, int64_t instance, int64_t* chosen) {
  uses_.fetch_add(1, std::memory_order_relaxed);
  last_used_ns_.store(clock_.Now().time_since_epoch().count(), std::memory_order_relaxed);
  // Held shared across pick + Enqueue: RemoveReplicas swaps the set under the
  // exclusive lock, so no query can reach a replica after it starts stopping.
  ReaderLock lock(&mu_);
  const Replicas& set = *replicas_;
  const size_t n = set.size();
  size_t pick = n;
  if (instance >= 0) {
    for (size_t i = 0; i < n; ++i) {
      if (set[i].id == instance) pick = i;
    }
  }
  if (pick == n) {
    const size_t first = static_cast<size_t>(next_.fetch_add(1)) % n;
    pick = first;
    int64_t best = set[first].batcher->queue_length();
    for (size_t i = 1; i < n && best > 0; ++i) {
      const size_t c = (first + i) % n;
      const int64_t q = set[c].batcher->queue_length();
      if (q < best) {
        best = q;
        pick = c;
      }
    }
  }
  if (chosen) *chosen = set[pick].id;
  // Still under the shared lock: a replica cannot stop under an inline run.
  if (set[pick].batcher->RunInlineIfIdle(task)) return Status::Ok();
  return set[pick].batcher->Enqueue(std::move(task));
}

void InstanceGroup::AddReplicas(std::vector<std::unique_ptr<Batcher>> more,
                                std::vector<int64_t> ids) {
  if (more.empty()) return;
  WriterLock lock(&mu_);
  auto r = std::make_shared<Replicas>(*replicas_);
  for (size_t i = 0; i < more.size(); ++i) {
    r->push_back({ids.at(i), std::shared_ptr<Batcher>(std::move(more[i]))});
  }
  replicas_ = std::move(r);
}

int InstanceGroup::RemoveReplicas(int count) {
  std::vector<std::shared_ptr<Batcher>> removed;
  {
    WriterLock lock(&mu_);
    auto r = std::make_shared<Replicas>(*replicas_);
    while (count-- > 0 && r->size() > 1) {
      removed.push_back(r->back().batcher);
      r->pop_back();
    }
    replicas_ = std::move(r);
  }
  // Outside the lock: Stop() executes what the replica had already queued.
  for (auto& b : removed) b->Stop();
  return static_cast<int>(removed.size());
}

std::vector<cluster::InstanceState> InstanceGroup::Snapshot(const LatencyCurve& curve) const {
  const auto set = replicas();
  std::vector<cluster::InstanceState> states;
  states.reserve(set->size());
  for (size_t i = 0; i < set->size(); ++i) {
    const Batcher::Load load = (*set)[i].batcher->load();
    cluster::InstanceState s;
    s.instance_id = (*set)[i].id;
    s.queued_samples = load.queued_samples;
    if (load.executing) {
      s.busy_until = load.executing_since +
                     std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double, std::milli>(
                         curve.Predict(load.executing_samples)));
    }
    states.push_back(s);
  }
  return states;
}

std::optional<double> InstanceGroup::ObservedSlowdown(const LatencyCurve& curve,
                                                      int64_t batch) const {
  const double profiled_us = curve.Measured(batch) * 1000.0;
  if (curve.points.empty() || !(profiled_us > 0)) return std::nullopt;
  const auto predicted = (*replicas())[0].batcher->PredictComputeUs(batch);
  if (!predicted) return std::nullopt;
  return *predicted / profiled_us;
}

int64_t InstanceGroup::QueuedQueries() const {
  int64_t total = 0;
  for (const auto& r : *replicas()) total += r.batcher->queue_length();
  return total;
}

int64_t InstanceGroup::InFlight() const {
  int64_t total = 0;
  for (const auto& r : *replicas()) {
    const Batcher::Load load = r.batcher->load();
    total += load.queued_queries + (load.executing ? 1 : 0);
  }
  return total;
}

size_t InstanceGroup::size() const { return replicas()->size(); }

SteadyClock::time_point InstanceGroup::last_used() const {
  return SteadyClock::time_point(
      SteadyClock::duration(last_used_ns_.load(std::memory_order_relaxed)));
}

}  // namespace somm
