// HandlerPool: a fixed set of threads running queued closures, where the REST
// frontend's handlers that may block go (metadata, decisions, the decoding
// of large inference bodies).
//
// Contract: Submit() queues a closure for the first free thread; closures
// run in no particular order across threads. Stop() runs what is queued,
// then joins; it is idempotent, and the destructor calls it. A closure
// submitted after Stop() never runs. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace somm::http {

class HandlerPool {
 public:
  explicit HandlerPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~HandlerPool() { Stop(); }
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  void Submit(std::function<void()> work) {
    {
      MutexLock lock(&mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_one();
  }
  void Stop() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> work;
      {
        MutexLock lock(&mu_);
        while (!stopping_ && queue_.empty()) cv_.wait(mu_.native());
        if (queue_.empty()) return;  // stopping, and everything queued has run
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }

  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> queue_ SOMM_GUARDED_BY(mu_);
  bool stopping_ SOMM_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // last: they start once the rest exists
};

}  // namespace somm::http
