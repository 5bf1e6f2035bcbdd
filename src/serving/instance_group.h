// InstanceGroup: the instances (replicas) of one variant on one hardware
// configuration, each an ExecutableModel behind its own Batcher.
//
// The group owns its batchers; destroying it stops them, and each drains its
// queue first. Enqueue picks the least-loaded instance unless told which.
// Thread-safe: the set of instances is fixed at construction.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "batching/batcher.h"
#include "selector/selector.h"

namespace somm {

class InstanceGroup {
 public:
  // `id` names the group in logs and responses, e.g. "digits-mlp:1:ts-int8".
  InstanceGroup(std::string variant_id, HardwareConfig hardware,
                std::vector<std::unique_ptr<Batcher>> instances);
  ~InstanceGroup();  // drains and stops every instance
  InstanceGroup(const InstanceGroup&) = delete;
  InstanceGroup& operator=(const InstanceGroup&) = delete;

  // instance < 0: the one with the fewest queued samples (ties round-robin).
  // On success *chosen says which instance took the task.
  Status Enqueue(BatchTask task, int instance, int* chosen);

  // Per-instance load for the selector: when each becomes free, predicted
  // with `curve`, and what is queued.
  std::vector<InstanceState> Snapshot(const LatencyCurve& curve) const;

  int64_t QueuedQueries() const;
  size_t size() const { return instances_.size(); }
  const std::string& variant_id() const { return variant_id_; }
  const HardwareConfig& hardware() const { return hardware_; }

 private:
  const std::string variant_id_;
  const HardwareConfig hardware_;
  std::vector<std::unique_ptr<Batcher>> instances_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace somm
