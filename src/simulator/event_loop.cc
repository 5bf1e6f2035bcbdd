#include "simulator/event_loop.h"

#include <algorithm>
#include <utility>

namespace somm::sim {

void EventLoop::At(TimePoint when, std::function<void()> fn) {
  queue_.push(Event{std::max(when, Now()), next_seq_++, std::move(fn)});
}

bool EventLoop::RunOne() {
  if (queue_.empty()) return false;
  // priority_queue::top() is const; the event is popped right after, so
  // moving its callback out first is safe.
  Event e = std::move(const_cast<Event&>(queue_.top()));
  queue_.pop();
  if (e.when > Now()) clock_.Set(e.when);
  ++events_run_;
  e.fn();
  return true;
}

void EventLoop::RunUntil(TimePoint until) {
  while (!queue_.empty() && queue_.top().when <= until) RunOne();
  if (until > Now()) clock_.Set(until);
}

void EventLoop::Run() {
  while (RunOne()) {
  }
}

}  // namespace somm::sim
