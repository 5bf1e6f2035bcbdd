// LeaderElector: one controller's part in electing the cluster's leader
// over the leader lease (cluster/lease_store.h).
//
// Tick(), called every tick_period() (a third of the lease, so two renewals
// may fail before it lapses), takes the lease or renews it. The first Tick
// that holds it calls on_elected; a later one that no longer holds it (the
// store answered that another has it, or could not be reached) calls
// on_lost, and the elector stays lost: the lease may already be another's,
// so a controller that lost it stops acting at once and comes back as a
// new standby (a process restarts). A standby's Tick that finds the lease
// held elsewhere does nothing.
//
// The same elector runs in a cluster's controllers (over Redis) and in the
// simulator's (over the in-memory lease on virtual time), so a leader can be
// killed in either and the standby takes over in the same way.
//
// Thread-safety: Tick and Resign run on one thread at a time (the caller's
// ticker); leading() and lost() may be read from any. The callbacks run on
// Tick's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "cluster/lease_store.h"

namespace somm::node {

struct LeaderElectorOptions {
  std::string holder;  // "id|host:port": who leads and where routers reach it
  std::chrono::milliseconds lease{3000};
  std::function<void()> on_elected;
  std::function<void(const std::string& why)> on_lost;
};

class LeaderElector {
 public:
  LeaderElector(cluster::LeaseStore& store, LeaderElectorOptions options);

  void Tick();
  // Gives the lease up if this elector holds it: a clean stop hands over at
  // once instead of after a lease.
  void Resign();

  bool leading() const { return leading_.load(); }
  bool lost() const { return lost_.load(); }
  std::chrono::milliseconds tick_period() const { return options_.lease / 3; }
  const std::string& holder() const { return options_.holder; }

 private:
  cluster::LeaseStore& store_;
  const LeaderElectorOptions options_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> lost_{false};
};

}  // namespace somm::node
