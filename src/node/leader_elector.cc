#include "node/leader_elector.h"

#include <utility>

namespace somm::node {

LeaderElector::LeaderElector(cluster::LeaseStore& store, LeaderElectorOptions options)
    : store_(store), options_(std::move(options)) {}

void LeaderElector::Tick() {
  if (lost_) return;
  StatusOr<bool> held = store_.HoldLease(options_.holder, options_.lease);
  const bool now_leading = held.ok() && *held;
  if (leading_ && !now_leading) {
    leading_ = false;
    lost_ = true;
    if (options_.on_lost) options_.on_lost(held.ok() ? "another holds it" : held.status().message());
    return;
  }
  if (!leading_ && now_leading) {
    leading_ = true;
    if (options_.on_elected) options_.on_elected();
  }
}

void LeaderElector::Resign() {
  if (leading_.exchange(false)) store_.ReleaseLease(options_.holder);
}

}  // namespace somm::node
