// ClusterState and Action: the one model of the cluster that every policy
// reads, and what the control policies return. The selector (per query), the
// autoscaler and placement (per tick) all read a ClusterState; workers report
// their share of it (worker/worker.h), the cluster-state store keeps it
// (cluster/cluster_state_store.h), and the router and the controller read it
// from there. The live system and the simulator fill it alike. Nothing here
// owns a thread, a clock or a model (DESIGN.md, "the control loop").
//
// Contract for whoever fills ClusterState:
//   - `groups` lists every instance group that is loaded *or loading*: a group
//     counts from the moment its load starts, with `replicas` already at the
//     requested count, so a policy never asks for the same load twice.
//   - `DeviceState::used_bytes` is the authority on memory in use (it may
//     include memory that belongs to no group); per-group `memory_bytes` is
//     what unloading one replica would give back.
//   - Actions are ordered and must be carried out in order. A kUnload with
//     cause kReplaced follows the kLoad or kSetReplicas whose `replaces`
//     names it, and runs only once that load has succeeded (make before
//     break); a kEvict precedes the load that needs its memory.
//   - Instance ids are stable for an instance's life and never reused by a
//     worker; -1 means "none".
//
// Plain values; no locking.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "profiles/variant_profile.h"

namespace somm::cluster {

// Times in the cluster's state are somm::Clock's (common/clock.h): the
// real steady clock live, a virtual one in the simulator and in tests.
using TimePoint = somm::Clock::TimePoint;

// One loaded instance: what the selector needs to predict a query's latency.
struct InstanceState {
  int64_t instance_id = 0;        // stable; assigned by the worker that hosts it
  int64_t queued_samples = 0;     // waiting, not yet executing
  TimePoint busy_until{};         // when its executing batch ends (past = idle)
};

// One memory pool with its compute. For "cpu", `cores` is the number of CPU
// cores instances may use; for a GPU it is the number of instances allowed to
// share it (each GPU instance has HardwareConfig::threads == 1).
struct DeviceState {
  std::string name;          // "cpu", "cuda:0"
  int64_t budget_bytes = 0;  // see DefaultMemoryBudget() in memory_budget.h
  int64_t used_bytes = 0;
  int cores = 1;
  std::string worker;        // the worker that owns it ("" = the only one)
};

// One usable, profiled variant of one model version on one HardwareConfig.
struct VariantOption {
  std::string model;
  int64_t version = 1;
  std::string task;
  std::string variant;  // "ts-int8"
  HardwareConfig hardware;
  std::string device;              // the memory pool it lives in: "cpu", "cuda:0"
  std::optional<double> accuracy;  // unset fails any accuracy floor
  LatencyCurve latency;
  int64_t max_batch = 1;
  int64_t memory_bytes = 0;  // per instance
  double load_ms = 0;
  // Unusable variants (accuracy too far below the original's) stay in the
  // model so that an explicit request can still name them; no policy picks one.
  bool usable = true;
  std::string unusable_reason;
  // Replicas of this option that idle unloading keeps: the configured
  // instances (model.yaml's instance_count) of the as-registered variant;
  // 0 = none kept.
  int floor_replicas = 0;
  // The most replicas the autoscaler runs of this option (0 = no ceiling).
  // A private model's is its instance_count, the count its owner's memory
  // quota is charged for (auth/guard.h): load on a tenant's model cannot
  // grow its memory past what the quota admitted.
  int max_replicas = 0;
};

// A loaded (or loading) instance group: `replicas` instances of one option.
struct GroupState {
  std::string worker;  // where it runs ("" = the only worker)
  // Its worker's zone (WorkerReport::zone; "" = none), filled in when the
  // store merges the reports: the router prefers groups in its own zone.
  std::string zone;
  std::string model;
  int64_t version = 1;
  std::string variant;
  HardwareConfig hardware;
  std::string device;
  int replicas = 1;
  int64_t memory_bytes = 0;    // per replica
  int64_t queued = 0;          // queries waiting now
  int64_t executing = 0;       // queries executing now
  bool loading = false;        // load started, not finished: never evicted
  TimePoint last_used{};       // last query finished or started
  double recent_rate_qps = 0;  // queries/s over the recent window
  double load_ms = 0;
  bool pinned = false;  // loaded explicitly (static mode): never evicted or unloaded
  int64_t uses_total = 0;  // queries ever enqueued here: readers difference it
  // How much slower than the profile its batches run lately (>= 0; 0 =
  // unknown), for the controller's calibration.
  double observed_slowdown = 0;
  // How much longer than its profile a batch of one sample took when its
  // instances loaded (their warm-up, on the serving path), ms; < 0 =
  // unknown. The router predicts a query's charge with it until batches it
  // saw served count (router/cost_calibration.h).
  double warm_overhead_ms = -1;
  std::vector<InstanceState> instances;  // empty while loading
};

// What one model version is being asked for.
struct ModelDemand {
  std::string model;
  int64_t version = 1;
  double rate_qps = 0;                 // observed arrivals over the last tick
  double latency_slo_ms = 0;           // tightest seen recently; 0 = none
  std::optional<double> min_accuracy;  // strictest seen recently
  // A monotonic counter kept by whoever sees the queries (the router); any
  // number of readers turn it into a rate by differencing.
  int64_t arrivals_total = 0;
  // What became of them, the same way (monotonic, per router, summed):
  // the rollout policy compares a canary with its stable version by these
  // (rollout/rollout_policy.h). Failures are the server's (a caller's bad
  // input is not the version's fault); latency is the router's end to end.
  int64_t answered_total = 0;
  int64_t failed_total = 0;
  double latency_ms_total = 0;
  // Shadow queries compared with the stable answer, and how many differed
  // (on the shadow version's row).
  int64_t compared_total = 0;
  int64_t disagreed_total = 0;
};

struct ClusterState {
  std::vector<DeviceState> devices;
  std::vector<VariantOption> options;
  std::vector<GroupState> groups;
  std::vector<ModelDemand> demand;
};

struct Action {
  enum Kind { kLoad, kUnload, kSetReplicas, kEvict };
  // Why a kUnload happens; the mechanism orders and guards by it, never by
  // the reason text.
  enum class Cause { kDemand, kIdle, kRedundant, kReplaced };
  Kind kind = kLoad;
  Cause cause = Cause::kDemand;
  // The worker that carries it out: the group's for an existing group, the
  // placement's for a new one ("" = the only worker).
  std::string worker;
  std::string model;
  int64_t version = 1;
  std::string variant;
  HardwareConfig hardware;
  std::string device;
  int replicas = 0;    // kLoad, kSetReplicas: the group's new count; kUnload: 0
  // kLoad, kSetReplicas: the labels (GroupLabel) of the groups this one
  // replaces; their kUnloads (cause kReplaced) follow and run only if this
  // action succeeded.
  std::vector<std::string> replaces;
  std::string reason;  // one line with the numbers, for the decision log
};
const char* CauseName(Action::Cause cause);

const char* ActionKindName(Action::Kind kind);
// "load digits-mlp:1:ts-int8@cpu2 on cpu x2: upgrade: ..."
std::string ToString(const Action& action);

// "digits-mlp:1:ts-int8@cpu2": the name a group and its actions go by.
std::string GroupLabel(const std::string& model, int64_t version, const std::string& variant,
                       const HardwareConfig& hardware);
inline std::string GroupLabel(const GroupState& g) {
  return GroupLabel(g.model, g.version, g.variant, g.hardware);
}
inline std::string GroupLabel(const VariantOption& o) {
  return GroupLabel(o.model, o.version, o.variant, o.hardware);
}
// The group an action is about.
inline std::string GroupLabel(const Action& a) {
  return GroupLabel(a.model, a.version, a.variant, a.hardware);
}

// `g` with every field but `instances`, which neither placement nor the
// autoscaler reads: copying a vector per group of the cluster per view (per
// load) and per tick was a large part of their cost at 1,000 workers.
GroupState WithoutInstances(const GroupState& g);

// A group of `replicas` of option `o`, last used at `last_used` (not loading,
// nothing queued).
GroupState GroupFor(const VariantOption& o, int replicas, TimePoint last_used);

// "1.5 GiB", "64.0 MiB", "512 B": memory in reasons.
std::string FormatBytes(int64_t bytes);

}  // namespace somm::cluster
