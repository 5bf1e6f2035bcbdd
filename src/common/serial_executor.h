// SerialExecutor: one thread that runs posted closures in order. The worker
// runs its loads and unloads on two of them (an urgent lane for loads a query
// waits on, a background lane for the rest), so that no caller, and no I/O
// thread, ever waits for a model to load.
//
// Shutdown() runs what was already posted, then joins; a closure posted after
// it is dropped and Post() returns false. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "common/mutex.h"

namespace somm {

class SerialExecutor {
 public:
  explicit SerialExecutor(std::string name);
  ~SerialExecutor();  // Shutdown()
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  bool Post(std::function<void()> work);
  void Shutdown();

 private:
  void Run();

  const std::string name_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> queue_ SOMM_GUARDED_BY(mu_);
  bool stopping_ SOMM_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace somm
