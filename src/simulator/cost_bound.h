// The lower bound on cost: the least a policy can pay to meet a given share
// of a trace's feasible queries within their SLOs, and the matching upper
// bound on attainment at a given cost. Every policy's dollars are reported
// over it (cost_over_bound), at that policy's own attainment.
//
// The relaxation. The trace's window [0, D] (D: the last arrival, where the
// report stops counting dollars) is cut into intervals I_t of length Δ (the
// last one ends at D). An option o is a (variant, hardware) of a model, at
// p_o dollars per replica-second and a load of l_o seconds. A query class c
// is a row target (a model, or a task's models), an SLO s_c and the
// constraints; its eligible options are those that honour its min_accuracy
// and max_cost (Honours), and k_oc, one replica's capacity at the SLO, is
// max b / T_o(b) over the batches b <= max_batch_size whose profiled time
// T_o(b) is within s_c. The linear program:
//
//   minimise   sum_o p_o [ sum_t |I_t| x_ot  +  min(l_o, Δ) sum_{t>=2} y_ot ]
//   subject to |I_t| x_ot >= sum of (queries of o's classes whose work
//                            falls in I_t) / k_oc           (busy time)
//              y_ot >= x_ot - x_o,t-1,  x, y >= 0             (loads)
//              at least a share `a` of the feasible queries is served.
//
// Why its optimum is at most what any policy pays (with the profiled batch
// times, as the simulator runs them at --latency-noise-sigma 0): take x_ot =
// the mean number of ready replicas of o over I_t. (1) A query met within
// its SLO s ran in a batch of b with T(b) <= s, on a ready replica, between
// its arrival and its deadline; its share T(b)/b of that batch is at least
// 1/k_oc, so the busy time of o in I_t, at most |I_t| x_ot, covers the
// shares of the work that falls there. A query that arrives in I_t at least
// s before I_t's end works in I_t; a later one anywhere up to its deadline,
// and one whose deadline is past D after the window, unpaid. (2) A replica
// is billed while it loads: each one that becomes ready at a time tau > Δ
// was billed min(l_o, Δ) seconds of loading inside the window. For every
// offset u in [0, 1) the ready count sampled at (t + u)Δ rises by
// sum_{t>=2} (x(t+u) - x(t-1+u))^+ at most as often as replicas became
// ready after Δ; averaging over u, sum_{t>=2} (x_ot - x_o,t-1)^+ is at most
// the number of those loads. So (x, y = (x_t - x_t-1)^+) is feasible and
// costs at most the policy's dollars. Queries without an SLO need no work
// inside the window (they may be answered after it) and cost nothing here.
//
// Solving: a dual-feasible point is a certificate (weak duality), so the
// bound needs no LP solver. For busy-time prices alpha_ot = p_o +
// (lambda_ot - lambda_o,t+1) / |I_t| with 0 <= lambda_ot <= p_o min(l_o, Δ)
// (lambda = 0 before t = 2 and after the last interval), every query has a
// price: the least alpha_ot / k_oc over its eligible options and the
// intervals its work may fall in (0 past D). The sum of the cheapest
// a * N prices (N feasible queries, fractionally) is the dual objective,
// so it is at most the LP's optimum and at most every policy's cost. The
// certificates tried: each Δ of BoundOptions, each weight theta of
// BoundOptions with lambda_ot = theta p_o min(l_o, Δ) where the busy time
// of o's cheapest-class work rises from I_t-1 to I_t (complementary
// slackness for the assignment without substitution); the bound is the
// best of them at each a, so it is monotone in a. theta = 0 is the fluid
// bound sum_q min_o p_o / k_o(s_q).
//
// Not in the relaxation (so the bound stays below): the fleet's cores and
// memory, integral replicas, queueing, warm-up (replicas up before t0 are
// free). Where the simulator departs from its premise: batch times with
// noise (--latency-noise-sigma, median 1) may run faster than profiled, and
// a worker stops billing a replica removed while it runs its last batch
// (replicas are removed idle first); a noisy run may then come in under it.
//
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "common/status.h"
#include "loadgen/trace.h"
#include "profiles/price_list.h"
#include "profiles/variant_profile.h"

namespace somm::sim::bound {

// One (variant, hardware) of a model.
struct Option {
  double usd_per_s = 0;  // one replica's price
  double load_s = 0;     // its profiled load time
};

// Queries of one row target, SLO and constraints.
struct QueryClass {
  std::optional<double> slo_ms;  // none: no work is due inside the window
  // The eligible options, each with one replica's queries/s at the SLO (> 0).
  std::vector<std::pair<size_t, double>> capacity;
};

// One feasible query of the trace.
struct Arrival {
  double at_s = 0;  // since the window's start
  int query_class = 0;
};

struct Demand {
  std::vector<Option> options;
  std::vector<QueryClass> classes;
  // The feasible queries (those of a class without options cost nothing:
  // no policy meets them, so they only make the bound lower).
  std::vector<Arrival> arrivals;
  double duration_s = 0;  // D
};

struct BoundOptions {
  // The interval lengths Δ tried (seconds, > 0).
  std::vector<double> intervals_s = {1, 10, 60};
  // The load weights theta tried (in [0, 1]).
  std::vector<double> load_weights = {0, 0.5, 1};
};

// The bound over a share of the feasible queries.
class CostCurve {
 public:
  CostCurve() = default;
  // `prices`: per certificate, (price of one query, queries at it),
  // in any order.
  CostCurve(int64_t feasible, std::vector<std::vector<std::pair<double, double>>> prices);

  int64_t feasible() const { return feasible_; }
  // Dollars at least paid by any policy that meets `attainment` (0..1) of the
  // feasible queries within their SLOs.
  double UsdAt(double attainment) const;
  // The most attainment any policy reaches for `usd` dollars (1 when every
  // feasible query fits).
  double AttainmentAt(double usd) const;

 private:
  int64_t feasible_ = 0;
  // Per certificate: prices ascending, with the cumulative queries and
  // dollars up to and including each.
  struct Step {
    double price = 0;
    double queries = 0;  // cumulative
    double usd = 0;      // cumulative
  };
  std::vector<std::vector<Step>> steps_;
};

// One replica's queries/s when every batch must fit in `slo_ms` (none: any
// batch): max b * 1000 / T(b) over b = 1..max(max_batch, 1) with the
// profile's T(b) = Measured(b) within the SLO; 0 when even batch 1 is not.
double CapacityAtSlo(const LatencyCurve& latency, int64_t max_batch, std::optional<double> slo_ms);

CostCurve ComputeCostBound(const Demand& demand, const BoundOptions& options = {});

// The demand of `trace` over the repository's profiles, as the simulator's
// policies see it: the same zoo (PublishTraceZoo), the same feasibility rule
// (Feasible), the same candidates (Candidates on at most `max_cores` threads,
// Honours), arrivals at timestamp / time_scale.
StatusOr<Demand> TraceDemand(const std::string& repository, const PriceList& prices, int max_cores,
                             double time_scale, const loadgen::Trace& trace);

}  // namespace somm::sim::bound
