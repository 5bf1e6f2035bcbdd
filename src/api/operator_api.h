// OperatorApi: what an operator's views read (GET /v2/somm/decisions,
// /v2/somm/workers, /v2/somm/overview, /v2/somm/actions; the dashboard in
// src/dashboard/): the decisions and control actions with their reasons,
// the cluster as this server sees it, and the prices cost is computed at.
// Read-only. A server without a view answers empty (no cluster, no
// decisions), which the views show as such.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/records.h"
#include "cluster/cluster_state.h"
#include "profiles/price_list.h"

namespace somm {

class OperatorApi {
 public:
  virtual ~OperatorApi() = default;

  // The newest per-query decisions first (the decision log), at most limit.
  virtual std::vector<DecisionRecord> RecentDecisions(size_t limit) const { return {}; }
  // Every worker's devices and instance groups; null when it has none.
  virtual std::shared_ptr<const cluster::ClusterState> ClusterView() const { return nullptr; }
  // The prices that cost figures are computed at.
  virtual PriceList Prices() const { return {}; }
  // The control actions (loads, evictions, replica changes, worker scaling),
  // newest first, each with its reason: the decision log's "control:" rows,
  // kept apart so that per-query decisions never push them out.
  virtual std::vector<DecisionRecord> RecentActions(size_t limit) const { return {}; }
  // Every control action since the controller started, by kind (its
  // somm_control_actions_total, wherever it runs).
  virtual std::map<std::string, int64_t> ControlActionTotals() const { return {}; }
};

}  // namespace somm
