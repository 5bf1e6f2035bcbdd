#include "loadgen/schedule.h"

#include <charconv>
#include <string>

namespace somm::loadgen {
namespace {

// A whole positive number, the whole of `text`.
bool ParsePositiveInt(std::string_view text, int* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && *out > 0;
}

}  // namespace

StatusOr<std::vector<int>> ParseConcurrencyRange(std::string_view spec) {
  const std::string what = "--concurrency-range '" + std::string(spec) + "'";
  std::vector<std::string_view> parts;
  size_t from = 0;
  while (true) {
    const size_t colon = spec.find(':', from);
    parts.push_back(spec.substr(from, colon == std::string_view::npos ? colon : colon - from));
    if (colon == std::string_view::npos) break;
    from = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    return InvalidArgument(what + ": expected START:END[:STEP], e.g. 1:16:2");
  }
  int start = 0;
  int end = 0;
  if (!ParsePositiveInt(parts[0], &start)) {
    return InvalidArgument(what + ": START must be a positive integer");
  }
  if (!ParsePositiveInt(parts[1], &end)) {
    return InvalidArgument(what + ": END must be a positive integer");
  }
  if (end < start) return InvalidArgument(what + ": END is below START");
  bool additive = false;
  int step = 2;
  if (parts.size() == 3) {
    std::string_view s = parts[2];
    if (!s.empty() && s.front() == '+') {
      additive = true;
      s.remove_prefix(1);
    }
    if (!ParsePositiveInt(s, &step)) {
      return InvalidArgument(what +
                             ": STEP must be a positive integer (or +N for an additive step)");
    }
    if (!additive && step < 2) {
      return InvalidArgument(what +
                             ": a multiplier STEP must be at least 2 (use +1 to step by one)");
    }
  }
  std::vector<int> points;
  for (int64_t n = start; n <= end; n = additive ? n + step : n * step) {
    points.push_back(static_cast<int>(n));
  }
  return points;
}

PoissonArrivals::PoissonArrivals(double rate_qps, uint64_t seed) : rng_(seed), gap_s_(rate_qps) {}

int64_t PoissonArrivals::NextOffsetNs() {
  offset_s_ += gap_s_(rng_);
  return static_cast<int64_t>(offset_s_ * 1e9);
}

}  // namespace somm::loadgen
