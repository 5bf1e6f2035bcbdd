// DecisionLog: the last N decisions, for GET /v2/somm/decisions: the
// router's (variant, hardware, instance) and the controller's (load, evict,
// resize, unload), each with its reason. A bounded ring; thread-safe.
#pragma once

#include <deque>
#include "common/mutex.h"
#include <vector>

#include "serving/inference_server.h"

namespace somm {

class DecisionLog {
 public:
  explicit DecisionLog(size_t capacity) : capacity_(capacity) {}
  void Add(DecisionRecord record) {
    MutexLock lock(&mu_);
    records_.push_back(std::move(record));
    while (records_.size() > capacity_) records_.pop_front();
  }
  // Newest first.
  std::vector<DecisionRecord> Recent(size_t limit) const {
    MutexLock lock(&mu_);
    std::vector<DecisionRecord> out;
    for (auto it = records_.rbegin(); it != records_.rend() && out.size() < limit; ++it) {
      out.push_back(*it);
    }
    return out;
  }

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::deque<DecisionRecord> records_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
