// SerialExecutor: one thread that runs posted closures in order. The worker
// runs its loads and unloads on two of them (an urgent lane for loads a query
// waits on, a background lane for the rest), so that no caller, and no I/O
// thread, ever waits for a model to load.
//
// The frontends run their slow control calls (registration, repository load
// and unload) on one each, bounded: past `max_queued` closures waiting,
// TryPost refuses the next, so a flood of slow calls is answered at once
// instead of queueing without end.
//
// Shutdown() runs what was already posted, then joins; a closure posted after
// it is dropped and Post() returns false. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>

#include "common/mutex.h"

namespace somm {

class SerialExecutor {
 public:
  // `max_queued`: closures that may wait at once, beside the one running
  // (0 = no bound).
  explicit SerialExecutor(std::string name, size_t max_queued = 0);
  ~SerialExecutor();  // Shutdown()
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // False: shut down or full, and `work` dropped.
  bool Post(std::function<void()> work) { return TryPost(std::move(work)) == Posted::kQueued; }
  enum class Posted { kQueued, kFull, kStopped };
  Posted TryPost(std::function<void()> work);
  size_t max_queued() const { return max_queued_; }
  void Shutdown();

 private:
  void Run();

  const std::string name_;
  const size_t max_queued_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> queue_ SOMM_GUARDED_BY(mu_);
  bool stopping_ SOMM_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace somm
