// InstanceGroup: the instances (replicas) of one variant on one hardware
// configuration, each an ExecutableModel behind its own Batcher.
//
// The group owns its batchers; destroying it stops them, and each drains its
// queue first. Enqueue picks the least-loaded instance unless told which.
// The controller may add and remove replicas while queries flow: the set of
// instances is a copy-on-write snapshot, a removed replica drains what it
// already queued, and no query reaches a replica once its removal began.
// Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "batching/batcher.h"
#include "selector/selector.h"

namespace somm {

class InstanceGroup {
 public:
  // `id` names the group in logs and responses, e.g. "digits-mlp:1:ts-int8".
  // `memory_bytes` is what one replica is accounted in the memory budget.
  InstanceGroup(std::string variant_id, HardwareConfig hardware,
                std::vector<std::unique_ptr<Batcher>> instances, int64_t memory_bytes = 0);
  ~InstanceGroup();  // drains and stops every instance
  InstanceGroup(const InstanceGroup&) = delete;
  InstanceGroup& operator=(const InstanceGroup&) = delete;

  // instance < 0 (or no longer present): the one with the fewest queued
  // samples (ties round-robin). On success *chosen says which took the task.
  Status Enqueue(BatchTask task, int instance, int* chosen);

  // Adds loaded replicas at the end.
  void AddReplicas(std::vector<std::unique_ptr<Batcher>> more);
  // Removes up to `count` replicas from the end (never the last one), waits
  // for each to finish what it had queued, and returns how many went.
  int RemoveReplicas(int count);

  // Per-instance load for the selector: when each becomes free, predicted
  // with `curve`, and what is queued.
  std::vector<InstanceState> Snapshot(const LatencyCurve& curve) const;

  // How much slower than `curve` its first replica's batches have run lately
  // (the batcher's learned prediction over the profile's, at batch `batch`);
  // nullopt when unknown. The controller calibrates profiles with it.
  std::optional<double> ObservedSlowdown(const LatencyCurve& curve, int64_t batch) const;

  int64_t QueuedQueries() const;
  // Queued plus executing queries over all replicas: 0 means idle.
  int64_t InFlight() const;
  size_t size() const;
  const std::string& variant_id() const { return variant_id_; }
  const HardwareConfig& hardware() const { return hardware_; }
  int64_t memory_bytes() const { return memory_bytes_; }

  // Use signals for the eviction policy, updated by Enqueue.
  SteadyClock::time_point last_used() const;
  // Queries enqueued since the previous call (the controller reads it once a tick).
  int64_t TakeUses() { return uses_.exchange(0); }

 private:
  using Replicas = std::vector<std::shared_ptr<Batcher>>;
  std::shared_ptr<const Replicas> replicas() const;

  const std::string variant_id_;
  const HardwareConfig hardware_;
  const int64_t memory_bytes_;
  mutable std::shared_mutex mu_;
  std::shared_ptr<const Replicas> replicas_;  // guarded by mu_; never empty
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> uses_{0};
  std::atomic<int64_t> last_used_ns_;
};

}  // namespace somm
