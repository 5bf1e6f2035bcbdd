// RoutingPolicy: how a router chooses, among the workers that hold a
// query's chosen variant on its chosen hardware, the one it sends the query
// to. The selector has already chosen what runs (model, variant, hardware);
// the policy chooses only where.
//
// Contract: Choose() gets every eligible holder (loaded, not failed for this
// query) on one side of the zone split (the router first asks among its own
// zone's holders, then among the others, and weighs the two picks itself),
// never empty, and returns one of them. It may read the holders' queue
// depths (GroupState: queued, executing, replicas) and the query's
// predicted wait at each (`predicted_wait_ms`, from the variant's profile;
// -1 when the profile says nothing), and draw from `rng` (seeded per query
// when the router is seeded, so a simulation repeats). Const and
// thread-safe: one policy serves every query of a router.
//
// Adding a policy: a class here and a line in RoutingPolicy::ByName; the
// flag `--routing-policy` of `somm serve`, `somm router` and `somm simulate`
// names it.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "common/status.h"

namespace somm {

class RoutingPolicy {
 public:
  using Holders = std::vector<const cluster::GroupState*>;
  using PredictedWaitMs = std::function<double(const cluster::GroupState&)>;

  virtual ~RoutingPolicy() = default;
  virtual const char* name() const = 0;
  virtual const cluster::GroupState* Choose(const Holders& holders, std::minstd_rand& rng,
                                            const PredictedWaitMs& predicted_wait_ms) const = 0;

  // Queued and executing queries per replica: what the policies compare.
  static double Load(const cluster::GroupState& g);
  // "p2c" (the default) or "least-wait"; INVALID_ARGUMENT names both.
  static StatusOr<std::shared_ptr<const RoutingPolicy>> ByName(const std::string& name);
  static const char* Names() { return "p2c, least-wait"; }
};

// The power of two choices: two holders drawn at random, the one with less
// queued work per replica wins. Little state read, load spread without
// herding when many routers act on views of the same age.
class PowerOfTwoChoices : public RoutingPolicy {
 public:
  const char* name() const override { return "p2c"; }
  const cluster::GroupState* Choose(const Holders& holders, std::minstd_rand& rng,
                                    const PredictedWaitMs& predicted_wait_ms) const override;
};

// Least predicted wait: the holder where the query's predicted wait (the
// work queued ahead of it on the least loaded replica, in batches, from the
// variant's profile) is shortest; ties, and holders without a prediction,
// go by load, then at random. Reads every holder: exact on a fresh view,
// but routers acting on the same stale view all send to the same worker.
class LeastPredictedWait : public RoutingPolicy {
 public:
  const char* name() const override { return "least-wait"; }
  const cluster::GroupState* Choose(const Holders& holders, std::minstd_rand& rng,
                                    const PredictedWaitMs& predicted_wait_ms) const override;
};

}  // namespace somm
