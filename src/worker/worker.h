// Worker: hosts instances. It owns the instance groups of the model versions
// it was told to load (each a variant on one hardware configuration, its
// replicas each behind a Batcher), executes decided queries on them, carries
// out typed actions (load, unload, evict, resize) and reports its share of
// the cluster state. It picks nothing: the router decides where a query runs
// and the controller what is loaded (worker_api.h is how both reach it).
//
// Actions never run on the caller's thread. Loads and unloads go to one of
// two serial lanes: the urgent lane for loads that a query waits on (at
// normal priority), the background lane for the controller's (paced by
// WorkerOptions::background_pacer and at idle priority). A load already under
// way is joined, never repeated. Execute() never blocks: a group that is not
// loaded is an error the router answers by asking for a load.
//
// Instance ids are stable and never reused within one Worker.
//
// Thread-safety: every method may be called concurrently. Lock: mu_ guards
// the group table (held briefly, never across a load, an unload or a
// callback).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "batching/batcher.h"
#include "cluster/cluster_state_store.h"
#include "common/duty_cycle_pacer.h"
#include "common/env.h"
#include "common/mutex.h"
#include "common/serial_executor.h"
#include "metrics/serving_metrics.h"
#include "registry/version_record.h"
#include "runtime/backend_set.h"
#include "worker/instance_group.h"
#include "worker/worker_api.h"

namespace somm {

struct WorkerOptions {
  std::string id = "local";
  std::string zone;
  // The device the as-registered variant's configured instances go on.
  Device device;
  // The memory instances may use on the CPU (reported; the controller places
  // within it). 0 = the default fraction of what is available at start.
  int64_t memory_budget_bytes = 0;
  // Background loads wait out the rest the pacer owes first (see
  // common/duty_cycle_pacer.h, --background-duty). Null: unpaced.
  std::shared_ptr<DutyCyclePacer> background_pacer;
  // Called (outside any lock) after every change of the group table, so the
  // cluster-state store can be told (LocalWorkerStub does).
  std::function<void()> on_change;
  // The machine's memory as the worker sees it; null = Env::Default().
  const Env* env = nullptr;
  // An idle instance of a one-thread variant runs a query whose batch is
  // predicted to take at most this long on the thread that brought it
  // (Batcher::RunInlineIfIdle); `done` of Execute may then run before
  // Execute returns. 0 = every query goes through the batcher's thread.
  double inline_max_compute_us = 0;
  // ... while its queries come at least this many microseconds apart on
  // average (BatcherOptions::inline_min_gap_us).
  double inline_min_gap_us = kDefaultInlineMinGapUs;
};


class Worker {
 public:
  // Each version loads on the backend of its platform, which `backends`
  // makes on first need. `metrics` must outlive the worker.
  Worker(WorkerOptions options, BackendSet backends, ServingMetrics& metrics);
  ~Worker();  // Shutdown()

  // NotFound, leaving `request` as it was, when the group is not loaded
  // here. Otherwise takes the request and `done` runs exactly once, on a
  // batcher thread or (when the queue refuses it) here.
  Status Execute(ExecuteRequest& request, ExecuteCallback done);
  // Carries out `action` on a lane; `done` runs once when it is done.
  void Apply(WorkerAction action, std::function<void(Status)> done);
  // This worker's share of the cluster state now.
  cluster::WorkerReport Report() const;
  bool HasGroup(const std::string& label) const;
  int64_t QueuedQueries() const;
  int64_t memory_budget_bytes() const { return memory_budget_bytes_; }
  const WorkerOptions& options() const { return options_; }
  // Refuses new actions and queries, finishes the actions already posted,
  // then drains and stops every instance.
  void Shutdown();

 private:
  struct Slot;
  void RunLoad(const WorkerAction& action);
  Status LoadGroup(const WorkerAction& action);
  Status Resize(const WorkerAction& action);
  Status Unload(const WorkerAction& action);
  StatusOr<std::vector<std::unique_ptr<Batcher>>> LoadReplicas(const VersionRecord& v,
                                                               const LoadOptions& load,
                                                               const std::string& id,
                                                               const LatencyCurve& curve,
                                                               int first, int count,
                                                               std::vector<int64_t>* ids);
  void PublishReplicaMetrics(const std::string& model, const std::string& version);
  void Changed();

  const WorkerOptions options_;
  const Env& env_;
  const BackendSet backends_;
  ServingMetrics& metrics_;
  int64_t memory_budget_bytes_ = 0;
  const std::string incarnation_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int64_t> next_instance_id_{0};
  mutable std::atomic<int64_t> report_sequence_{0};
  mutable SharedMutex mu_;
  std::map<std::string, std::shared_ptr<Slot>> slots_ SOMM_GUARDED_BY(mu_);  // by GroupLabel
  SerialExecutor urgent_lane_{"somm-load-urg"};
  SerialExecutor background_lane_{"somm-load-bg"};
};

// How `variant` of `v` loads on `hw`: as profiled, or, for the variant as
// registered before any profile exists, as the model's config says.
StatusOr<LoadOptions> VariantLoadOptions(const VersionRecord& v, const std::string& variant,
                                         const HardwareConfig& hw);

}  // namespace somm
