#include "common/clock.h"

namespace somm {
namespace {

class RealClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint until) const override {
    cv.wait_until(lock, until);
  }
};

}  // namespace

const Clock& Clock::Real() {
  static const RealClock clock;
  return clock;
}

ManualClock::ManualClock(TimePoint start) : now_(start.time_since_epoch().count()) {}

Clock::TimePoint ManualClock::Now() const {
  return TimePoint(std::chrono::steady_clock::duration(now_.load()));
}

void ManualClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                            TimePoint until) const {
  wait_calls_.fetch_add(1);
  if (Now() >= until) return;
  cv.wait_for(lock, std::chrono::milliseconds(1));
}

void ManualClock::Advance(std::chrono::steady_clock::duration d) { now_.fetch_add(d.count()); }

void ManualClock::Set(TimePoint t) { now_.store(t.time_since_epoch().count()); }

}  // namespace somm
