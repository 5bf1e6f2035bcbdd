#include "router/routing_policy.h"

#include <algorithm>

namespace somm {

double RoutingPolicy::Load(const cluster::GroupState& g) {
  return static_cast<double>(g.queued + g.executing) / std::max(1, g.replicas);
}

StatusOr<std::shared_ptr<const RoutingPolicy>> RoutingPolicy::ByName(const std::string& name) {
  if (name == "p2c" || name.empty()) return std::shared_ptr<const RoutingPolicy>(std::make_shared<PowerOfTwoChoices>());
  if (name == "least-wait") return std::shared_ptr<const RoutingPolicy>(std::make_shared<LeastPredictedWait>());
  return InvalidArgument("unknown routing policy '" + name + "' (use " + Names() + ")");
}

const cluster::GroupState* PowerOfTwoChoices::Choose(const Holders& holders, std::minstd_rand& rng,
                                                     const PredictedWaitMs&) const {
  // Two drawn by reservoir sampling, in one pass: the same draws as before
  // the policy was a plug-in, so seeded simulations repeat.
  const cluster::GroupState* first = nullptr;
  const cluster::GroupState* second = nullptr;
  int seen = 0;
  for (const cluster::GroupState* g : holders) {
    ++seen;
    if (seen == 1) {
      first = g;
    } else if (seen == 2) {
      second = g;
    } else {
      const int k = std::uniform_int_distribution<int>(0, seen - 1)(rng);
      if (k == 0) first = g;
      if (k == 1) second = g;
    }
  }
  return second != nullptr && Load(*second) < Load(*first) ? second : first;
}

const cluster::GroupState* LeastPredictedWait::Choose(const Holders& holders,
                                                      std::minstd_rand& rng,
                                                      const PredictedWaitMs& predicted_wait_ms) const {
  const cluster::GroupState* best = nullptr;
  double best_wait = 0;
  int ties = 0;
  for (const cluster::GroupState* g : holders) {
    double wait = predicted_wait_ms(*g);
    // Without a profile the load stands in, after every predicted holder.
    if (wait < 0) wait = 1e9 + Load(*g);
    if (best == nullptr || wait < best_wait) {
      best = g;
      best_wait = wait;
      ties = 1;
    } else if (wait == best_wait &&
               std::uniform_int_distribution<int>(0, ties++)(rng) == 0) {
      best = g;  // an even draw among the ties seen so far
    }
  }
  return best;
}

}  // namespace somm
