// MedianUs: the micro-benchmarks' timer (bench_json_decode,
// bench_response_params). One untimed call first (first-touch of buffers,
// a thread's parser), then `rounds` rounds of `calls` calls; the median of
// the rounds' mean µs per call, so that a round the shared machine slowed
// does not move the figure.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace somm::bench {

template <typename F>
double MedianUs(F call, int rounds, int calls) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> means;
  call();
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) call();
    means.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  std::sort(means.begin(), means.end());
  return means[means.size() / 2];
}

}  // namespace somm::bench
