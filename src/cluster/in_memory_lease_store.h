// InMemoryLeaseStore: the leader lease (lease_store.h) held in this
// process, expiring on the Clock it is given: the simulator's controllers
// elect their leader through it on virtual time, and unit tests on a
// ManualClock.
#pragma once

#include <string>

#include "cluster/lease_store.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace somm::cluster {

class InMemoryLeaseStore : public LeaseStore {
 public:
  // `clock` must outlive the store.
  explicit InMemoryLeaseStore(const somm::Clock& clock) : clock_(clock) {}
  StatusOr<bool> HoldLease(const std::string& holder, std::chrono::milliseconds ttl) override;
  void ReleaseLease(const std::string& holder) override;
  std::string LeaseHolder() const override;

 private:
  const somm::Clock& clock_;
  mutable Mutex mu_;
  std::string holder_ SOMM_GUARDED_BY(mu_);
  somm::Clock::TimePoint expires_ SOMM_GUARDED_BY(mu_){};
};

}  // namespace somm::cluster
