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
#include "cluster/cluster_state.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "profiles/variant_profile.h"

namespace somm {

class InstanceGroup {
 public:
  // `id` names the group in logs and responses, e.g. "digits-mlp:1:ts-int8".
  // `memory_bytes` is what one replica is accounted in the memory budget.
  // ids[i] is instances[i]'s stable instance id (unique within the worker).
  // `clock` stamps last_used() and must outlive the group; null =
  // Clock::Real(). The batchers arrive built, so they read the clock of their
  // own BatcherOptions: give them the same one.
  InstanceGroup(std::string variant_id, HardwareConfig hardware,
                std::vector<std::unique_ptr<Batcher>> instances, std::vector<int64_t> ids,
                int64_t memory_bytes = 0, const Clock* clock = nullptr);
  ~InstanceGroup();  // drains and stops every instance
  InstanceGroup(const InstanceGroup&) = delete;
  InstanceGroup& operator=(const InstanceGroup&) = delete;

  // instance: a stable id. < 0 (or no longer present): the one with the fewest queued
  // samples (ties round-robin). On success *chosen says which took the task.
  Status Enqueue(BatchTask task, int64_t instance, int64_t* chosen);

  // Adds loaded replicas at the end; `ids` are their stable instance ids.
  void AddReplicas(std::vector<std::unique_ptr<Batcher>> more, std::vector<int64_t> ids);
  // Removes up to `count` replicas from the end (never the last one), waits
  // for each to finish what it had queued, and returns how many went.
  int RemoveReplicas(int count);

  // Per-instance load for the selector: when each becomes free, predicted
  // with `curve`, and what is queued.
  std::vector<cluster::InstanceState> Snapshot(const LatencyCurve& curve) const;

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
  // Queries ever enqueued: a monotonic counter that any number of readers
  // turn into a rate by differencing.
  int64_t uses_total() const { return uses_.load(std::memory_order_relaxed); }

 private:
  struct Replica {
    int64_t id;
    std::shared_ptr<Batcher> batcher;
  };
  using Replicas = std::vector<Replica>;
  std::shared_ptr<const Replicas> replicas() const;

  const std::string variant_id_;
  const HardwareConfig hardware_;
  const int64_t memory_bytes_;
  const Clock& clock_;
  mutable SharedMutex mu_;
  std::shared_ptr<const Replicas> replicas_ SOMM_GUARDED_BY(mu_);  // never empty
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> uses_{0};
  std::atomic<int64_t> last_used_ns_;
};

}  // namespace somm
