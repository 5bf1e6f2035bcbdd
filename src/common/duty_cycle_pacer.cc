#include "common/duty_cycle_pacer.h"

#include <algorithm>
#include <thread>

namespace somm {

DutyCyclePacer::DutyCyclePacer(double duty)
    : duty_(duty > 0 && duty <= 1 ? duty : (duty > 1 ? 1.0 : 0.01)) {}

DutyCyclePacer::Clock::time_point DutyCyclePacer::EarliestStart(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::max(now, rested_at_);
}

void DutyCyclePacer::Record(Clock::time_point end, Clock::duration worked) {
  if (duty_ >= 1 || worked <= Clock::duration::zero()) return;
  const auto rest = std::chrono::duration_cast<Clock::duration>(worked * ((1 - duty_) / duty_));
  std::lock_guard<std::mutex> lock(mu_);
  // Rest still owed when this work ended carries over: back-to-back pieces
  // add up. Otherwise the rest starts at the end of this piece.
  rested_at_ = std::max(rested_at_, end) + rest;
}

DutyCyclePacer::Clock::duration DutyCyclePacer::WaitTurn() {
  const auto now = Clock::now();
  const auto start = EarliestStart(now);
  if (start <= now) return Clock::duration::zero();
  std::this_thread::sleep_until(start);
  return start - now;
}

}  // namespace somm
