// The offline oracle: a provisioning policy that knows the whole trace. Per
// interval (interval_s), it provisions for each model the cheapest set of
// replicas that carries the interval's coming load at its SLOs, and the
// replay (policy_replay.cc) starts those loads early enough to be ready when
// the interval begins (load times paid ahead, their replica-seconds
// counted). It is a lower bound on cost at the attained SLO in the sense
// that no online policy knows more; it is not an exact optimum:
//   * a replica's capacity at an SLO is its best profiled throughput with
//     batches of at most half the SLO (a query may wait for the batch ahead
//     of it, then run in its own), or of batch 1 when half the SLO is below
//     batch 1 yet the SLO is not;
//   * each SLO's load goes, whole, to the candidate with the lowest price per
//     query/s at that SLO (a greedy assignment, not a joint optimum); the
//     SLOs sharing a candidate share its replicas, sized at the tightest of
//     them;
//   * the load is the busiest one-second bin of the interval per SLO (the
//     bins of several SLOs are added, an upper bound of their joint peak),
//     at `headroom` of capacity.
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "simulator/zoo.h"

namespace somm::sim::oracle {

struct OracleOptions {
  // Planning interval.
  double interval_s = 10;
  // Share of a replica's capacity the plan uses: Poisson arrivals within a
  // second still queue, so a replica sized to exactly its peak misses.
  double headroom = 0.8;
};

// One SLO's load on a model in one interval.
struct SloDemand {
  double slo_ms = 0;  // 0 = no SLO
  double peak_qps = 0;
  // The candidate the load must go to (a task's or a constrained query's,
  // chosen by the replay across the task's models); the route is not
  // written for it. None: the cheapest at the SLO, routed by slo_ms.
  std::optional<size_t> candidate;
};

struct ModelPlan {
  std::map<size_t, int> replicas;  // candidate -> replicas (none: the model is not loaded)
  std::map<double, size_t> route;  // slo_ms -> the candidate its queries go to
  double usd_per_s = 0;
};

// A replica's throughput when its batch must finish within `slo_ms` (see above).
double CapacityAtSlo(const Candidate& c, int64_t max_batch, double slo_ms);

ModelPlan PlanInterval(const std::vector<Candidate>& cands, int64_t max_batch,
                       const std::vector<SloDemand>& demand, const OracleOptions& o);

}  // namespace somm::sim::oracle
