// Clock: the seam between code that waits and the time it waits for, as
// LevelDB's Env is for files. Components that cut batches or stamp times (the
// Batcher, the InstanceGroup) read the time and sleep on a condition variable
// only through a Clock, so their tests can drive a ManualClock instead of
// sleeping and stop depending on how fast a loaded machine is.
//
// Clock::Real() is the process's std::chrono::steady_clock and what every
// component uses when its options name no clock. A Clock is not owned by the
// components that use it: it must outlive them (Real() lives forever). Both
// implementations are thread-safe; Now() is a virtual call and an atomic
// load, cheap enough for the serving hot path.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace somm {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Blocks on `cv` (with `lock` held on entry and on return, as
  // std::condition_variable does) until notified, until Now() reaches
  // `until`, or spuriously: callers loop and re-check their condition.
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         TimePoint until) const = 0;

  // The process-wide steady clock.
  static const Clock& Real();
};

// A clock for tests: time stands still until the test moves it. Starts an
// hour after the steady clock's epoch, so that tests subtracting from Now()
// never go below it.
//
// Moving the clock cannot notify the condition variables that waiters sleep
// on (it does not know them, and a notify without the waiter's mutex could
// be lost between the waiter's check and its wait). So WaitUntil sleeps at
// most about 1 ms of real time and returns: a waiter re-checks within a
// millisecond of Advance()/Set(). A test that needs to know that a waiter has
// looked at the new time waits until wait_calls() has grown by 2 after moving
// the clock (the first call may have begun with a time read before the move).
class ManualClock : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{} + std::chrono::hours(1));

  TimePoint Now() const override;
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint until) const override;

  void Advance(std::chrono::steady_clock::duration d);
  void Set(TimePoint t);
  // How many WaitUntil calls have begun.
  int64_t wait_calls() const { return wait_calls_.load(); }

 private:
  std::atomic<std::chrono::steady_clock::rep> now_;
  mutable std::atomic<int64_t> wait_calls_{0};
};

}  // namespace somm
