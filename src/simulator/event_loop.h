// EventLoop: the simulator's virtual time. Events are callbacks scheduled at
// points on a ManualClock; Run() takes them in time order (ties in the order
// they were scheduled, so a run is a function of its inputs and its seed)
// and sets the clock to each event's time before calling it. Nothing sleeps:
// a simulated hour takes as long as its events take to compute.
//
// The components under simulation (the Router, the Controller, the
// simulated workers) read the clock the loop owns, so the policies they run
// see the virtual time as they would see the real one.
//
// Thread-safety: none. One thread owns the loop and everything it drives;
// an event may schedule further events, also in the past (they run next, at
// the current time: the clock never goes back).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "common/clock.h"

namespace somm::sim {

// Milliseconds (profiles and traces count in them) as the loop's time.
inline std::chrono::nanoseconds FromMs(double ms) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::milli>(ms));
}

class EventLoop {
 public:
  using TimePoint = Clock::TimePoint;
  using Duration = std::chrono::steady_clock::duration;

  EventLoop() = default;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  const ManualClock& clock() const { return clock_; }
  TimePoint Now() const { return clock_.Now(); }
  // Where the simulation's time starts (ManualClock's start).
  TimePoint start() const { return start_; }

  void At(TimePoint when, std::function<void()> fn);
  void After(Duration delay, std::function<void()> fn) { At(Now() + delay, std::move(fn)); }

  // Runs every event scheduled at or before `until`, then leaves the clock
  // at `until`.
  void RunUntil(TimePoint until);
  // Runs until no event is left.
  void Run();
  // Events run so far.
  int64_t events_run() const { return events_run_; }
  size_t pending() const { return queue_.size(); }

 private:
  struct Event {
    TimePoint when;
    uint64_t seq = 0;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.when != b.when ? a.when > b.when : a.seq > b.seq;
    }
  };
  bool RunOne();

  ManualClock clock_;
  const TimePoint start_ = clock_.Now();
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  uint64_t next_seq_ = 0;
  int64_t events_run_ = 0;
};

}  // namespace somm::sim
