// LeaseStore: the one lease that names a cluster's leader controller.
//
// At most one holder has the lease at a time. A holder keeps it by renewing
// it within its time to live; one that stops renewing (killed, cut off from
// the store) loses it when the TTL runs out, and the first other holder to
// ask then takes it. Holders are strings that say who and where
// ("controller-0|10.0.0.5:9001"). The store's time is the one that counts:
// a Redis lease expires on Redis's clock, the in-memory one on the Clock it
// was given.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace somm::cluster {

class LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  // Takes the lease for `holder`, or renews it if `holder` has it: true
  // while held, false while another has it. UNAVAILABLE when the store
  // cannot be reached (the caller then acts as if it lost the lease: the
  // TTL will end it).
  virtual StatusOr<bool> HoldLease(const std::string& holder, std::chrono::milliseconds ttl) = 0;
  // Gives the lease up if `holder` has it (a clean stop hands over at once).
  virtual void ReleaseLease(const std::string& holder) = 0;
  // Who has the lease, as this process's view holds it; "" for no one.
  virtual std::string LeaseHolder() const = 0;
};

}  // namespace somm::cluster
