#include "serving/instance_group.h"

namespace somm {

InstanceGroup::InstanceGroup(std::string variant_id, HardwareConfig hardware,
                             std::vector<std::unique_ptr<Batcher>> instances)
    : variant_id_(std::move(variant_id)),
      hardware_(hardware),
      instances_(std::move(instances)) {}

InstanceGroup::~InstanceGroup() {
  for (auto& b : instances_) b->Stop();
}

Status InstanceGroup::Enqueue(BatchTask task, int instance, int* chosen) {
  const size_t n = instances_.size();
  size_t pick;
  if (instance >= 0 && static_cast<size_t>(instance) < n) {
    pick = static_cast<size_t>(instance);
  } else {
    const size_t first = static_cast<size_t>(next_.fetch_add(1)) % n;
    pick = first;
    int64_t best = instances_[first]->queue_length();
    for (size_t i = 1; i < n && best > 0; ++i) {
      const size_t c = (first + i) % n;
      const int64_t q = instances_[c]->queue_length();
      if (q < best) {
        best = q;
        pick = c;
      }
    }
  }
  if (chosen) *chosen = static_cast<int>(pick);
  return instances_[pick]->Enqueue(std::move(task));
}

std::vector<InstanceState> InstanceGroup::Snapshot(const LatencyCurve& curve) const {
  std::vector<InstanceState> states;
  states.reserve(instances_.size());
  for (size_t i = 0; i < instances_.size(); ++i) {
    const Batcher::Load load = instances_[i]->load();
    InstanceState s;
    s.instance_id = static_cast<int32_t>(i);
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

int64_t InstanceGroup::QueuedQueries() const {
  int64_t total = 0;
  for (const auto& b : instances_) total += b->queue_length();
  return total;
}

}  // namespace somm
