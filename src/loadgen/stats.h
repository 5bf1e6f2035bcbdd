// Latency statistics of the load generator: nearest-rank percentiles and the
// summary (p50/p90/p99/p99.9/mean) that every report row carries.
//
// Nearest rank (the smallest value with at least p% of the samples at or
// below it) is what perf_analyzer and HdrHistogram report, and unlike
// interpolation it always names a latency that some query really had.
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <vector>

namespace somm::loadgen {

// The value at percentile p (0 < p <= 100) of `sorted` (ascending); 0 when
// empty.
int64_t PercentileOfSorted(const std::vector<int64_t>& sorted, double p);

struct LatencySummary {
  int64_t count = 0;
  int64_t p50 = 0;
  int64_t p90 = 0;
  int64_t p99 = 0;
  int64_t p999 = 0;
  double mean = 0;
};

// Summarises samples in any order (sorts a copy; the caller keeps theirs).
LatencySummary Summarize(std::vector<int64_t> values);

}  // namespace somm::loadgen
