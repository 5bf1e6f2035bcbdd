#include "cluster/in_memory_lease_store.h"

namespace somm::cluster {

StatusOr<bool> InMemoryLeaseStore::HoldLease(const std::string& holder,
                                             std::chrono::milliseconds ttl) {
  MutexLock lock(&mu_);
  const somm::Clock::TimePoint now = clock_.Now();
  if (holder_ != holder && !holder_.empty() && now < expires_) return false;
  holder_ = holder;
  expires_ = now + ttl;
  return true;
}

void InMemoryLeaseStore::ReleaseLease(const std::string& holder) {
  MutexLock lock(&mu_);
  if (holder_ == holder) holder_.clear();
}

std::string InMemoryLeaseStore::LeaseHolder() const {
  MutexLock lock(&mu_);
  return clock_.Now() < expires_ ? holder_ : "";
}

}  // namespace somm::cluster
