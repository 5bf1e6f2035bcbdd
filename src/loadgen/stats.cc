#include "loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace somm::loadgen {

int64_t PercentileOfSorted(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // ceil(p/100 * n) is the 1-based rank; the small epsilon keeps 99.9% of
  // 1000 samples at rank 999 despite 0.999 * 1000 = 999.0000000000001.
  auto rank = static_cast<int64_t>(std::ceil(p / 100.0 * n - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(sorted.size()));
  return sorted[static_cast<size_t>(rank - 1)];
}

LatencySummary Summarize(std::vector<int64_t> values) {
  LatencySummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<int64_t>(values.size());
  s.p50 = PercentileOfSorted(values, 50);
  s.p90 = PercentileOfSorted(values, 90);
  s.p99 = PercentileOfSorted(values, 99);
  s.p999 = PercentileOfSorted(values, 99.9);
  // Sum in double: a window of 10^6 latencies of 10^6 us would overflow
  // nothing in int64, but the mean is a double anyway.
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.count);
  return s;
}

}  // namespace somm::loadgen
