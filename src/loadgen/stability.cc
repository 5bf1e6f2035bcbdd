#include "loadgen/stability.h"

#include <cmath>
#include <numeric>

namespace somm::loadgen {

bool WithinPercentOfMean(const std::vector<double>& values, double pct) {
  if (values.empty()) return false;
  const double mean =
      std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  if (mean <= 0) return false;
  for (const double v : values) {
    if (std::abs(v - mean) > mean * pct / 100.0) return false;
  }
  return true;
}

bool IsStable(const std::vector<WindowSummary>& windows, double pct) {
  if (windows.size() < static_cast<size_t>(kStabilityWindows)) return false;
  std::vector<double> qps;
  std::vector<double> p99;
  for (size_t i = windows.size() - kStabilityWindows; i < windows.size(); ++i) {
    if (windows[i].successes == 0) return false;
    qps.push_back(windows[i].throughput_qps);
    p99.push_back(static_cast<double>(windows[i].p99_us));
  }
  return WithinPercentOfMean(qps, pct) && WithinPercentOfMean(p99, pct);
}

}  // namespace somm::loadgen
