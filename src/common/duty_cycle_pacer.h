// Paces background work (model loads and unloads) to a share of wall time.
//
// Background work already runs at the lowest CPU priority
// (runtime/torch/torch_threads.h), but priority only decides who gets a core
// first: on a 2-core machine, back-to-back loads still keep one core, its
// caches and the memory bus busy, and the models serving next to them lost
// 1.32x in p99 latency (docs/isolation.md), while the same churn at one call
// a second cost 1.07x. So, like a compaction rate limiter in a storage engine,
// this spaces background work out: after W seconds of it, the next piece may
// start only after a rest of W * (1 - duty) / duty, where W is the CPU time
// the work used. Rests add up over back-to-back pieces; after an idle spell
// longer than the rest owed, work starts at once, so an occasional load never
// waits.
//
// Work that must not wait (a load a query is waiting for) starts at once but
// is still recorded, so the background work after it rests for it too.
//
// Thread-safe. Time is passed in, so policy tests need no clock.
#pragma once

#include <chrono>
#include <mutex>

namespace somm {

class DutyCyclePacer {
 public:
  using Clock = std::chrono::steady_clock;

  // `duty` in (0, 1]: the largest share of wall time that paced work may
  // use over a back-to-back stretch. Values outside are clamped; 1 never
  // waits.
  explicit DutyCyclePacer(double duty);

  double duty() const { return duty_; }

  // The earliest time paced work may start, never before `now`.
  Clock::time_point EarliestStart(Clock::time_point now) const;

  // Records work that ended at `end` and used `worked`. Callers pass the CPU
  // time the work used: on a busy machine low-priority work spends most of
  // its wall time waiting for a core, which costs the serving threads
  // nothing.
  void Record(Clock::time_point end, Clock::duration worked);

  // Sleeps until EarliestStart(now) and returns how long it slept.
  Clock::duration WaitTurn();

 private:
  const double duty_;
  mutable std::mutex mu_;
  Clock::time_point rested_at_{};  // the owed rest ends here
};

}  // namespace somm
