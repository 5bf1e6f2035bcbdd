#include "batching/slo_policy.h"

#include <algorithm>
#include <cmath>

namespace somm {

ComputePredictor::ComputePredictor(int64_t max_batch,
                                   const std::function<double(int64_t batch)>& seed) {
  const size_t sizes = static_cast<size_t>(std::max<int64_t>(1, max_batch)) + 1;
  seed_us_.assign(sizes, 0.0);
  ewma_us_.assign(sizes, 0.0);
  if (!seed) return;
  for (size_t n = 1; n < sizes; ++n) {
    const double us = seed(static_cast<int64_t>(n));
    if (std::isfinite(us) && us > 0) seed_us_[n] = us;
  }
}

double ComputePredictor::KnownUs(int64_t batch) const {
  const size_t n = static_cast<size_t>(batch);
  if (ewma_us_[n] > 0) return ewma_us_[n];
  if (seed_us_[n] > 0) return seed_us_[n] * seed_scale_;
  return 0;
}

std::optional<double> ComputePredictor::PredictUs(int64_t batch) const {
  const int64_t max = static_cast<int64_t>(ewma_us_.size()) - 1;
  batch = std::clamp<int64_t>(batch, 1, max);
  if (const double us = KnownUs(batch); us > 0) return us;
  int64_t below = batch - 1;
  while (below >= 1 && KnownUs(below) <= 0) --below;
  int64_t above = batch + 1;
  while (above <= max && KnownUs(above) <= 0) ++above;
  const bool has_below = below >= 1, has_above = above <= max;
  if (has_below && has_above) {
    const double lo = KnownUs(below), hi = KnownUs(above);
    return lo + (hi - lo) * static_cast<double>(batch - below) / static_cast<double>(above - below);
  }
  // Outside the known sizes, err on the slow side: a smaller batch is taken
  // to cost as much as the smallest known one, a larger one to gain nothing
  // per sample over the largest.
  if (has_above) return KnownUs(above);
  if (has_below) return KnownUs(below) * static_cast<double>(batch) / static_cast<double>(below);
  return std::nullopt;
}

void ComputePredictor::Observe(int64_t batch, double us) {
  if (!std::isfinite(us) || us < 0) return;
  const int64_t max = static_cast<int64_t>(ewma_us_.size()) - 1;
  batch = std::clamp<int64_t>(batch, 1, max);
  const size_t n = static_cast<size_t>(batch);
  // The first observation of a seeded size starts from the (scaled) seed, so
  // that a single outlier does not replace a profile measured at that size;
  // that of an unseeded size replaces a mere interpolation.
  const double known = KnownUs(batch);
  const double base = known > 0 ? known : us;
  if (seed_us_[n] > 0) seed_scale_ += kAlpha * (us / seed_us_[n] - seed_scale_);
  // max(): an observation of 0 µs (a clock too coarse) must not read as "never observed".
  ewma_us_[n] = std::max(base + kAlpha * (us - base), 1e-3);
}

BatchCapAimd::BatchCapAimd(int64_t ceiling)
    : ceiling_(std::max<int64_t>(1, ceiling)), cap_(ceiling_) {}

void BatchCapAimd::OnBatch(bool met_every_deadline) {
  if (met_every_deadline) {
    cap_ = std::min(ceiling_, cap_ + 1);
  } else {
    cap_ = std::max<int64_t>(1, cap_ * 9 / 10);
  }
}

std::optional<double> PredictQueueUs(const ComputePredictor& predictor, int64_t samples,
                                     int64_t cap) {
  if (!predictor.PredictUs(1)) return std::nullopt;
  if (samples <= 0) return 0.0;
  cap = std::max<int64_t>(1, cap);
  const int64_t full = samples / cap, rest = samples % cap;
  double us = 0;
  if (full > 0) {
    const std::optional<double> batch = predictor.PredictUs(cap);
    if (!batch) return std::nullopt;
    us += static_cast<double>(full) * *batch;
  }
  if (rest > 0) {
    const std::optional<double> batch = predictor.PredictUs(rest);
    if (!batch) return std::nullopt;
    us += *batch;
  }
  return us;
}

}  // namespace somm
