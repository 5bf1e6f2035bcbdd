// DecisionLog: the last N selector decisions, for GET /v2/somm/decisions.
// A bounded ring; Add and Recent are thread-safe.
#pragma once

#include <deque>
#include <mutex>
#include <vector>

#include "serving/inference_server.h"

namespace somm {

class DecisionLog {
 public:
  explicit DecisionLog(size_t capacity) : capacity_(capacity) {}
  void Add(DecisionRecord record) {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(std::move(record));
    while (records_.size() > capacity_) records_.pop_front();
  }
  // Newest first.
  std::vector<DecisionRecord> Recent(size_t limit) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<DecisionRecord> out;
    for (auto it = records_.rbegin(); it != records_.rend() && out.size() < limit; ++it) {
      out.push_back(*it);
    }
    return out;
  }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<DecisionRecord> records_;
};

}  // namespace somm
