// What load to offer: the concurrency points of a closed-loop sweep and the
// arrival times of an open-loop (Poisson) run.
//
// --concurrency-range START:END[:STEP] lists the closed-loop points.
//   STEP is a multiplier by default, which suits a latency/throughput curve:
//     1:16:2  -> 1 2 4 8 16        1:10:3 -> 1 3 9
//   A leading '+' makes it an additive step, as perf_analyzer's is:
//     1:16:+5 -> 1 6 11 16         4:4    -> 4
//   STEP defaults to 2 (a multiplier). END is included only when the steps
//   land on it.
//
// PoissonArrivals draws exponential inter-arrival gaps of mean 1/rate from a
// seeded generator, so one seed always yields the same schedule.
//
// Thread-safety: ParseConcurrencyRange is pure; a PoissonArrivals is a value
// that one thread (the dispatcher) advances.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace somm::loadgen {

// InvalidArgument names the spec and the problem.
StatusOr<std::vector<int>> ParseConcurrencyRange(std::string_view spec);

class PoissonArrivals {
 public:
  // rate > 0 queries per second.
  PoissonArrivals(double rate_qps, uint64_t seed);

  // The next arrival's offset from the start of the schedule, in ns; strictly
  // the previous one plus an exponential gap.
  int64_t NextOffsetNs();

 private:
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_s_;
  double offset_s_ = 0;
};

}  // namespace somm::loadgen
