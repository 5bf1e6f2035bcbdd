// CostCalibration: how much longer a batch takes when serving than its
// profile says, per device ("cpu", "cuda:0"), learned from the batches the
// router sees finish.
//
// Why: a query is charged its share of its batch's measured hardware time
// (docs/selection.md, "What a query pays"), while the selector predicts that
// charge from the profile. Profiles time one reused input back to back on
// warm caches; serving adds a fresh input, caches cooled by the request's
// own handling and neighbours on the same cores. That difference is mostly a
// fixed time per batch (tens of microseconds on a CPU, several times a small
// model's profiled compute), so it is learned as milliseconds to add to the
// profiled batch time, not as a ratio.
//
// It is learned per device, not per variant or per thread count: every
// variant on a device then carries the same overhead, so one that has
// served never looks dearer than one that has not merely for having been
// measured (which would send queries to unmeasured variants, and loads
// with them).
//
// The overhead is a quantile (Options::quantile) of measured minus profiled
// over the device's last Options::window batches, never below 0 (a profile
// slower than serving stays as it is). It counts once Options::min_batches
// batches are in, so that one batch (the first after a load is often many
// times slower) does not set it. Batches older than Options::max_age are
// forgotten: a burst of other work that pushed the predictions above the
// clients' ceilings (so that no batch runs to correct them) does not keep
// queries out for good. Only the cost prediction uses it; predicted latency
// stays the profile's.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"

namespace somm {

class CostCalibration {
 public:
  using TimePoint = Clock::TimePoint;

  struct Options {
    // Batches remembered per device.
    int window = 64;
    // Batches needed before the overhead counts (0 until then).
    int min_batches = 16;
    // Which quantile of measured - profiled is the overhead: 0.75 predicts at
    // least the measured batch time for about 3 batches in 4, without
    // letting the slowest few in a window set it.
    double quantile = 0.75;
    // Batches older than this no longer count. Short, because when every
    // query has a ceiling, a prediction that a burst pushed above them stays
    // there (no batch runs to lower it) until the burst's batches expire.
    std::chrono::milliseconds max_age{5000};
  };

  CostCalibration() : CostCalibration(Options()) {}
  explicit CostCalibration(Options options);

  // A batch on `device` (Device::ToString()) finished at `now` after
  // `measured_ms`; its variant's profile predicted `profiled_ms` for that
  // batch size. Ignored when either time is not positive.
  void Observe(const std::string& device, double measured_ms, double profiled_ms, TimePoint now);

  // Milliseconds to add to a profiled batch time on `device`.
  double OverheadMs(const std::string& device, TimePoint now) const;

 private:
  struct Differences {
    std::vector<double> ring;  // up to Options::window, in ms
    size_t next = 0;           // where the next one goes once the ring is full
    double overhead_ms = 0;    // the quantile of `ring`, at least 0
    TimePoint last{};          // when the newest one finished
  };
  bool Fresh(const Differences& d, TimePoint now) const;

  const Options options_;
  mutable SharedMutex mu_;
  std::unordered_map<std::string, Differences> by_device_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
