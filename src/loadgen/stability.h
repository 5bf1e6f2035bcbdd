// The stability rule that ends a measurement: perf_analyzer's, made explicit.
//
// A load point is measured in consecutive windows. It is stable once the last
// `kStabilityWindows` (3) windows agree: each window's throughput and each
// window's p99 latency lies within +-pct% of the mean of those three values.
// Windows with no successful query have no p99 and never count as stable
// (a throughput of 0 agrees with itself, but says nothing).
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <vector>

namespace somm::loadgen {

inline constexpr int kStabilityWindows = 3;

// What the rule needs from one measurement window.
struct WindowSummary {
  double throughput_qps = 0;
  int64_t p99_us = 0;
  int64_t successes = 0;
};

// True when every one of `values` is within pct% of their mean.
bool WithinPercentOfMean(const std::vector<double>& values, double pct);

// True when the last kStabilityWindows windows agree (see above); false when
// there are fewer.
bool IsStable(const std::vector<WindowSummary>& windows, double pct);

}  // namespace somm::loadgen
