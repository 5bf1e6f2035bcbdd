// The worker scaler: every tick, whether the cluster needs one more worker,
// one fewer, or the ones it has. A pure function of the cluster state, what
// the provisioner says (which workers it may stop, how many it is still
// starting), the controller's count of placements that did not fit, its own
// memory from the previous tick and the time, like the autoscaler
// (autoscaler.h), which sizes the groups that this scaler then finds room
// for. Provisioners (provisioner/provisioner.h) carry the decision out.
//
// A group is *in use* when it has served a query within in_use_window_s.
// Rules, in order:
//   1. Bounds: fewer workers (registered plus being started) than
//      min_workers -> one more now; more than max_workers -> drain one.
//   2. Being started: while a worker asked for has not registered, hold;
//      its memory and cores are already on their way.
//   3. Short: a placement that did not fit (the controller had to refuse a
//      load, or to evict a group in use to make room: the plan needs more
//      memory than the workers have) -> one more worker at once. The groups
//      in use taking more than memory_high of all budgets, or their threads
//      more than compute_high of all cores -> one more worker after
//      scale_out_ticks consecutive such ticks (a burst of one tick is not a
//      trend). Never above max_workers.
//   4. Spare: a worker the provisioner may stop whose groups in use would
//      fit on the others (first fit, largest first) with each of them at
//      most scale_in_fill of its budget and of its cores, continuously for
//      scale_in_after_s, and cooldown_s after the last step -> drain the
//      least useful such worker: fewest groups in use, then the least
//      memory in use (cheapest to reload elsewhere), then the fewest groups,
//      then its id. Never below min_workers.
// The gap between the scale-out thresholds (a refusal, or memory_high) and
// scale_in_fill, plus the two delays, is the hysteresis: a worker drained
// must leave the rest well inside their budgets, so the next tick does not
// ask for it back.
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "controller/placement.h"  // the cluster model's names in somm::control

namespace somm::control {

struct WorkerScalerOptions {
  int min_workers = 1;
  int max_workers = 1;
  // A group served a query this recently counts as in use: a minute covers
  // the autoscaler's scale-down window, so a model between bursts keeps its
  // place.
  double in_use_window_s = 60;
  // Above 90% of all budgets in use, the next load evicts a group in use.
  double memory_high = 0.9;
  // Threads of the groups in use above the cores (intra-op threads spin).
  double compute_high = 1.0;
  // Three ticks of shortage (without a refusal) before a scale-out.
  int scale_out_ticks = 3;
  // A drained worker's groups must fit the rest at 70% or less: well below
  // memory_high, so the drain does not trigger the next scale-out.
  double scale_in_fill = 0.7;
  // Five minutes of spare capacity before a drain, as Kubernetes' HPA
  // stabilisation window: a worker takes seconds to start and its groups
  // seconds to load again, so load that returns within minutes keeps it.
  double scale_in_after_s = 300;
  // No drain within two minutes of the last step (either way).
  double cooldown_s = 120;
};

struct WorkerScalerInput {
  // The workers the provisioner may stop (it started them); others are
  // never drained by the scaler.
  std::set<std::string> removable;
  // Workers asked for that have not registered yet.
  int pending = 0;
  // The controller's monotonic count of placements that did not fit, and
  // the last one's reason.
  int64_t shortfalls_total = 0;
  std::string last_shortfall;
};

struct WorkerScalerMemory {
  int short_ticks = 0;                   // consecutive ticks short of memory or cores
  std::optional<TimePoint> spare_since;  // since when some worker has been spare
  std::optional<TimePoint> last_step;
  std::optional<int64_t> shortfalls_seen;  // unset until the first tick
};

struct WorkerScaleDecision {
  enum class Kind { kHold, kScaleOut, kScaleIn };
  Kind kind = Kind::kHold;
  int workers = 0;    // registered plus being started, now
  int desired = 0;    // after this decision
  std::string drain;  // kScaleIn: the worker to drain
  // kScaleOut: "min_workers", "placement", "memory", "compute";
  // kScaleIn: "max_workers", "spare". A metric label.
  std::string cause;
  std::string reason;         // one line with the numbers (also why a hold holds)
  WorkerScalerMemory memory;  // pass to the next call
};

const char* WorkerScaleKindName(WorkerScaleDecision::Kind kind);

WorkerScaleDecision DecideWorkers(const ClusterState& state, const WorkerScalerInput& input,
                                  const WorkerScalerMemory& memory, TimePoint now,
                                  const WorkerScalerOptions& options = {});

}  // namespace somm::control
