// DecisionLog: the last N decisions, for GET /v2/somm/decisions: the
// router's (variant, hardware, instance) and the controller's (load, evict,
// resize, unload), each with its reason. A bounded ring; thread-safe.
// Control actions (outcome "control:<kind>") are also kept in a ring of
// their own, so that a stream of per-query decisions never pushes the rarer
// actions out of GET /v2/somm/actions.
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
    if (record.outcome.rfind("control:", 0) == 0) {
      actions_.push_back(record);
      while (actions_.size() > capacity_) actions_.pop_front();
    }
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
  // The control actions alone, newest first.
  std::vector<DecisionRecord> RecentActions(size_t limit) const {
    MutexLock lock(&mu_);
    std::vector<DecisionRecord> out;
    for (auto it = actions_.rbegin(); it != actions_.rend() && out.size() < limit; ++it) {
      out.push_back(*it);
    }
    return out;
  }

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::deque<DecisionRecord> records_ SOMM_GUARDED_BY(mu_);
  std::deque<DecisionRecord> actions_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
