// DecisionLog: the last N decisions, for GET /v2/somm/decisions: the
// router's (variant, hardware, instance) and the controller's (load, evict,
// resize, unload), each with its reason. A bounded ring; thread-safe.
// Control actions (outcome "control:<kind>") are also kept in a ring of
// their own, so that a stream of per-query decisions never pushes the rarer
// actions out of GET /v2/somm/actions. Add numbers each record; Complete
// fills in a query's actual latency and status once it is answered (a
// record already pushed out of the ring is skipped: the log is bounded, not
// a ledger), so that the log shows predicted against actual. It also
// counts the control actions by kind since it was made (what
// somm_control_actions_total counts where the controller runs), for a
// cluster router's overview, whose own metrics have none.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"

#include "api/records.h"

namespace somm {

class DecisionLog {
 public:
  explicit DecisionLog(size_t capacity) : capacity_(capacity) {}
  // The record's number, for Complete.
  uint64_t Add(DecisionRecord record) {
    MutexLock lock(&mu_);
    constexpr std::string_view kControl = "control:";
    if (record.outcome.starts_with(kControl)) {
      ++action_totals_[record.outcome.substr(kControl.size())];
      actions_.push_back(record);
      while (actions_.size() > capacity_) actions_.pop_front();
    }
    records_.push_back(std::move(record));
    while (records_.size() > capacity_) {
      records_.pop_front();
      ++first_number_;
    }
    return first_number_ + records_.size() - 1;
  }
  // `actual_ms` < 0: the query failed before a latency was measured.
  void Complete(uint64_t number, double actual_ms, std::string status) {
    MutexLock lock(&mu_);
    if (number < first_number_ || number - first_number_ >= records_.size()) return;
    DecisionRecord& r = records_[number - first_number_];
    r.actual_latency_ms = actual_ms;
    r.status = std::move(status);
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
  // Control actions by kind ("load", "evict", "scale_out", ...), all of them.
  std::map<std::string, int64_t> ActionTotals() const {
    MutexLock lock(&mu_);
    return action_totals_;
  }

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::deque<DecisionRecord> records_ SOMM_GUARDED_BY(mu_);
  uint64_t first_number_ SOMM_GUARDED_BY(mu_) = 1;  // records_.front()'s; 0 = never logged
  std::deque<DecisionRecord> actions_ SOMM_GUARDED_BY(mu_);
  std::map<std::string, int64_t> action_totals_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
